"""Hugging Face interop against `transformers` itself (the pinned version of
python/requirements.txt), both ways, for each family (GPT-2, Llama, Mixtral):
- our export of a trained float64 checkpoint loads with AutoModelForCausalLM, and its loss on the
  validation windows equals `vescale-train eval` on the checkpoint;
- a tiny model that transformers makes (random weights) and writes with save_pretrained imports
  with `hf:DIR`, and our eval of it equals transformers' loss on the same windows.
Bars: GPT-2 runs in float64 through transformers (relative error <= 1e-10); its Llama and
Mixtral do not: RMSNorm, the rotary tables, the attention softmax and Mixtral's router run in
float32 whatever the model's dtype, so theirs is below float32's bar (1e-5): 1e-7, where
2026-12-02 measured 2.6e-10 to 2.7e-9."""
import json
import os
import shutil
import tempfile
import unittest

import torch
import torch.nn.functional as F
import transformers

from clients import relative, run
import test_hf_export as hf_export  # the families' job configs
from hf_reference import validation_windows

FAMILIES = ("gpt", "llama", "mixtral")
# Where transformers computes in float64 throughout (see above).
BAR = {"gpt": 1e-10, "llama": 1e-7, "mixtral": 1e-7}


def options(family):
    """from_pretrained's and from_config's arguments: float64, and Mixtral's experts one by one
    (its default, torch's grouped GEMM, takes no float64)."""
    return {"dtype": torch.float64, **({"experts_implementation": "eager"}
                                       if family == "mixtral" else {})}


def transformers_loss(family, folder, text_path):
    return validation_loss(
        transformers.AutoModelForCausalLM.from_pretrained(folder, **options(family)), text_path)


def validation_loss(model, text_path):
    """`model`'s mean loss over the validation windows eval takes (test_hf_export's)."""
    model.eval()
    with open(text_path, "rb") as f:
        chunks = validation_windows(f.read(), hf_export.SEQ, hf_export.WINDOWS,
                                    hf_export.VAL_FRACTION)
    losses = []
    with torch.no_grad():
        for chunk in chunks:
            logits = model(chunk[:-1].unsqueeze(0)).logits[0]
            losses.append(F.cross_entropy(logits, chunk[1:]).item())
    return sum(losses) / len(losses)


def transformers_config(family):
    """The family's tiny model (test_hf_export.FAMILIES) as transformers' own config class."""
    common = dict(vocab_size=256, tie_word_embeddings=False)
    if family == "gpt":
        # Our GPT's GELU is the exact one; GPT-2's own default is the tanh approximation.
        return transformers.GPT2Config(n_positions=16, n_embd=16, n_layer=2, n_head=4,
                                       activation_function="gelu", **{**common,
                                                                      "tie_word_embeddings": True})
    llama = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=16, rms_norm_eps=1e-5,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0}, **common)
    if family == "llama":
        return transformers.LlamaConfig(**llama)
    return transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                      sliding_window=None, **llama)


class Transformers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-clients-transformers-")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:  # the text test_hf_export trains on
            for i in range(400):
                f.write(f"line {i}: the {i * 7 % 13}th fox jumps over {i * 3 % 11} lazy dogs.\n")
        cls.configs = {}
        for family in FAMILIES:
            path = os.path.join(cls.tmp, f"{family}.toml")
            with open(path, "w") as f:
                f.write(hf_export.config_text(family, cls.text))
            cls.configs[family] = path

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def our_eval(self, family, checkpoint):
        result = run("eval", self.configs[family], "--checkpoint", checkpoint,
                     *hf_export.ONE_PROCESS, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return float(result.stdout.split()[-1])

    def test_transformers_reads_our_exports(self):
        for family in FAMILIES:
            dump = os.path.join(self.tmp, f"{family}-run")
            # 2 float64 steps on one process (test_hf_export trains the sharded layouts).
            result = run("train", self.configs[family], f"--job.dump_folder={dump}",
                         *hf_export.ONE_PROCESS, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            checkpoint = os.path.join(dump, "checkpoints", "latest")
            exported = os.path.join(self.tmp, f"{family}-hf")
            result = run("export", checkpoint, "-o", exported, "--format", "hf", "--dtype",
                         "float64", timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            ours = self.our_eval(family, checkpoint)
            theirs = transformers_loss(family, exported, self.text)
            error = relative(theirs, ours)
            print(f"{family}: eval {ours!r}, transformers {transformers.__version__} on our "
                  f"export {theirs!r}: relative error {error:.2e} (bar {BAR[family]:.0e})")
            self.assertLess(error, BAR[family])

    def test_models_transformers_saved_import(self):
        for family in FAMILIES:
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(transformers_config(family),
                                                                  **options(family))
            with torch.no_grad():  # weights far enough from the initial ones to mean something
                for p in model.parameters():
                    p.add_(torch.randn_like(p), alpha=0.2)
            folder = os.path.join(self.tmp, f"{family}-made-by-transformers")
            model.save_pretrained(folder)
            with open(os.path.join(folder, "config.json")) as f:
                saved = json.load(f)
            theirs = transformers_loss(family, folder, self.text)
            ours = self.our_eval(family, "hf:" + folder)
            error = relative(ours, theirs)
            print(f"{family}: transformers' own {saved['architectures'][0]} "
                  f"({sorted(os.listdir(folder))}): transformers {theirs!r}, our eval of hf:DIR "
                  f"{ours!r}: relative error {error:.2e} (bar {BAR[family]:.0e})")
            self.assertLess(error, BAR[family])
            if family != "gpt":
                # transformers 5 writes the rotary base inside rope_parameters: it is read and
                # checked as the top-level rope_theta of 4.x was.
                self.assertEqual(saved["rope_parameters"]["rope_theta"], 500.0)
                result = run("eval", self.configs[family], "--checkpoint", "hf:" + folder,
                             "--model.rope_theta=10000", *hf_export.ONE_PROCESS)
                self.assertEqual(result.returncode, 2, result.stderr[-3000:])
                self.assertIn("rope_theta = 500.0, but this job's model.rope_theta = 10000",
                              result.stderr)


if __name__ == "__main__":
    unittest.main()
