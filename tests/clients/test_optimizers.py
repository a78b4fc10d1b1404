"""Our optimizers against torch.optim's (the pinned torch of python/requirements.txt), stepped on
the same gradients (vescale-optimizer-steps: tests/clients/optimizer_steps.cpp), float64:
- AdamW: torch.optim.AdamW, decay on matrices only (as our training gives it);
- Muon: torch.optim.Muon on the matrices with AdamW on the rest, as NOTE [Muon] says, for both
  scales and with and without Nesterov. torch.optim.Muon runs Newton-Schulz in bfloat16 whatever
  the parameters' dtype; ours runs it in theirs. So the float64 comparison runs torch's own
  Newton-Schulz source with that one cast removed (<= 1e-12), and torch's stock bf16 Muon is held
  to ours within bf16's precision."""
import inspect
import os
import shutil
import subprocess
import tempfile
import unittest

import torch
import torch.optim._muon as torch_muon
from safetensors.torch import load_file, save_file

STEPS = 5
LR, WEIGHT_DECAY, BETAS, EPS = 0.02, 0.1, (0.9, 0.95), 1e-8
# Matrices of each orientation for Muon; a 2-D parameter AdamW updates under Muon (an embedding's
# role) and a vector (a bias: no decay).
SHAPES = {"matrix.wide": (8, 12), "matrix.tall": (12, 8), "matrix.square": (10, 10),
          "embedding": (16, 8), "bias": (12,)}
TOOL = os.environ.get("VESCALE_OPTIMIZER_STEPS", "vescale-optimizer-steps")


def newton_schulz_in_the_inputs_dtype():
    """torch.optim.Muon's Newton-Schulz, its source as torch ships it but for the cast to bf16."""
    source = inspect.getsource(torch_muon._zeropower_via_newtonschulz)
    cast = "ortho_grad = grad.bfloat16()"
    assert source.count(cast) == 1, "torch's Newton-Schulz changed: look again at this test"
    namespace = dict(vars(torch_muon))
    exec(source.replace(cast, "ortho_grad = grad.clone()"), namespace)
    return namespace["_zeropower_via_newtonschulz"]


class Optimizers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vescale-clients-optim-")
        generator = torch.Generator().manual_seed(0)
        self.start = {n: torch.randn(s, dtype=torch.float64, generator=generator)
                      for n, s in SHAPES.items()}
        self.grads = [{n: torch.randn(s, dtype=torch.float64, generator=generator)
                       for n, s in SHAPES.items()} for _ in range(STEPS)]

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ours(self, options):
        """Each parameter after each step of our optimizer: [step][name]."""
        tensors = {f"param/{n}": t for n, t in self.start.items()}
        for k, grads in enumerate(self.grads):
            tensors.update({f"grad/{k}/{n}": g for n, g in grads.items()})
        metadata = {"steps": str(STEPS), "lr": repr(LR), "weight_decay": repr(WEIGHT_DECAY),
                    "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
                    **options}
        path, out = os.path.join(self.tmp, "in.safetensors"), os.path.join(self.tmp, "out.st")
        save_file(tensors, path, metadata=metadata)
        result = subprocess.run([TOOL, path, out], capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        after = load_file(out)
        return [{n: after[f"param/{k}/{n}"] for n in SHAPES} for k in range(STEPS)]

    def theirs(self, make):
        """Each parameter after each step of the torch optimizers `make(params)` returns."""
        params = {n: t.clone().requires_grad_() for n, t in self.start.items()}
        optimizers = make(params)
        out = []
        for grads in self.grads:
            for n, p in params.items():
                p.grad = grads[n].clone()
            for o in optimizers:
                o.step()
            out.append({n: p.detach().clone() for n, p in params.items()})
        return out

    def adamw(self, params, names):
        groups = [{"params": [params[n] for n in names if params[n].dim() >= 2]},
                  {"params": [params[n] for n in names if params[n].dim() < 2],
                   "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)

    def error(self, ours, theirs):
        """The largest error of any parameter after any step, relative to how far torch's steps
        moved it (the parameter itself would hide an update's error behind its size)."""
        return max(((ours[k][n] - theirs[k][n]).norm() /
                    (theirs[k][n] - self.start[n]).norm()).item()
                   for k in range(STEPS) for n in SHAPES)

    def test_adamw_is_torch_optim_adamw(self):
        ours = self.ours({"optimizer": "adamw"})
        theirs = self.theirs(lambda p: [self.adamw(p, list(SHAPES))])
        error = self.error(ours, theirs)
        print(f"AdamW, {STEPS} float64 steps: largest error (relative to the update) against "
              f"torch.optim.AdamW (torch {torch.__version__}) {error:.1e}")
        self.assertLess(error, 1e-12)

    def test_muon_is_torch_optim_muon(self):
        matrices = [n for n in SHAPES if n.startswith("matrix.")]
        others = [n for n in SHAPES if n not in matrices]
        exact = newton_schulz_in_the_inputs_dtype()
        stock = torch_muon._zeropower_via_newtonschulz
        for scale, adjust in (("adamw_rms", "match_rms_adamw"), ("shape", "original")):
            for nesterov in (True, False):
                ours = self.ours({"optimizer": "muon", "momentum": "0.95",
                                  "nesterov": str(nesterov).lower(), "ns_steps": "5",
                                  "muon_scale": scale})

                def make(p):
                    return [torch.optim.Muon([p[n] for n in matrices], lr=LR,
                                             weight_decay=WEIGHT_DECAY, momentum=0.95,
                                             nesterov=nesterov, ns_steps=5,
                                             adjust_lr_fn=adjust), self.adamw(p, others)]

                try:
                    torch_muon._zeropower_via_newtonschulz = exact
                    float64 = self.error(ours, self.theirs(make))
                finally:
                    torch_muon._zeropower_via_newtonschulz = stock
                bf16 = self.error(ours, self.theirs(make))
                print(f"Muon ({scale}, nesterov {nesterov}), {STEPS} float64 steps: largest "
                      f"relative error against torch.optim.Muon {float64:.1e} with its "
                      f"Newton-Schulz in float64, {bf16:.1e} as it ships (bf16)")
                self.assertLess(float64, 1e-12)
                self.assertLess(bf16, 5e-2)  # bf16: 8 bits, through 5 iterations


if __name__ == "__main__":
    unittest.main()
