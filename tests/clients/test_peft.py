"""LoRA adapters against `peft` and `transformers` themselves (the pinned versions of
python/requirements.txt), NOTE [LoRA] and NOTE [PEFT adapters]: a GPT and a Llama train float64
adapters on dp=2 x tp=2, a Mixtral on dp=2 x ep=2 with ZeRO-3 (sharded checkpoints), on a base
given as "hf:DIR" (our export of a trained checkpoint); `export --format peft` writes adapter_model.safetensors and
adapter_config.json, which peft's PeftModel loads onto that base with the loss our eval computes
on the LoRA checkpoint; `export --format hf --merge-lora` writes weights that transformers reads
with the same loss. GPT-2's q, k and v adapters become one adapter of its fused c_attn, and a
Mixtral's experts' w1, w3 and w2 adapters peft's target_parameters adapters of transformers'
stacked gate_up_proj and down_proj. An adapter peft makes itself (get_peft_model,
save_pretrained) starts a run here (lora.adapter): our eval of it on the base equals peft's
loss, and training goes on from it.
Bars as test_transformers: GPT-2 runs in float64 through transformers (1e-10); its Llama and
Mixtral compute RMSNorm, the rotary tables and softmax in float32 whatever the model's dtype
(1e-7)."""
import json
import os
import shutil
import tempfile
import unittest

import peft
import torch
import transformers

from clients import relative, run
import test_hf_export as hf_export
from test_transformers import options, validation_loss

FAMILIES = ("gpt", "llama", "mixtral")
BAR = {"gpt": 1e-10, "llama": 1e-7, "mixtral": 1e-7}
TARGETS = {"gpt": '["qkv", "o", "fc", "proj"]',
           "llama": '["q", "k", "v", "o", "gate", "up", "down"]',
           "mixtral": '["q", "v", "o", "experts"]'}
# The same projections as peft names them: modules, and parameters (target_parameters).
PEFT_TARGETS = {"gpt": ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"],
                "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                          "down_proj"],
                "mixtral": ["q_proj", "v_proj", "o_proj"]}
PEFT_PARAMETERS = {"mixtral": ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]}
# Dropout on the adapters' inputs, but on experts' (peft's ParamWrapper takes none).
DROPOUT = {"gpt": 0.1, "llama": 0.1, "mixtral": 0.0}


class Peft(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-clients-peft-")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:  # the text test_hf_export trains on
            for i in range(400):
                f.write(f"line {i}: the {i * 7 % 13}th fox jumps over {i * 3 % 11} lazy dogs.\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ok(self, *args):
        result = run(*args, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result

    def base(self, family):
        """The family's config, and a base: 2 float64 steps exported as Hugging Face weights."""
        config = os.path.join(self.tmp, f"{family}.toml")
        base = os.path.join(self.tmp, f"{family}-base-hf")
        if not os.path.exists(base):
            with open(config, "w") as f:
                f.write(hf_export.config_text(family, self.text))
            base_run = os.path.join(self.tmp, f"{family}-base")
            self.ok("train", config, f"--job.dump_folder={base_run}", *hf_export.ONE_PROCESS)
            self.ok("export", os.path.join(base_run, "checkpoints", "latest"), "-o", base,
                    "--format", "hf", "--dtype", "float64")
        return config, base

    def test_peft_loads_our_adapters_and_our_merge_is_theirs(self):
        for family in FAMILIES:
            config, base = self.base(family)
            lora = ["--lora.rank=4", "--lora.alpha=8", f"--lora.dropout={DROPOUT[family]}",
                    f"--lora.targets={TARGETS[family]}", f"--checkpoint.load=hf:{base}"]
            dump = os.path.join(self.tmp, f"{family}-lora")
            self.ok("train", config, f"--job.dump_folder={dump}", "--training.steps=3",
                    "--checkpoint.interval=3", "--optimizer.lr=0.05", *lora)
            checkpoint = os.path.join(dump, "checkpoints", "latest")
            ours = float(self.ok("eval", config, "--checkpoint", checkpoint, *lora,
                                 *hf_export.ONE_PROCESS).stdout.split()[-1])

            adapter = os.path.join(self.tmp, f"{family}-adapter")
            print(self.ok("export", checkpoint, "-o", adapter, "--format", "peft").stdout.strip())
            with open(os.path.join(adapter, "adapter_config.json")) as f:
                print(f"{family} adapter_config.json: {json.load(f)}")
            model = transformers.AutoModelForCausalLM.from_pretrained(base, **options(family))
            base_loss = validation_loss(model, self.text)
            model = peft.PeftModel.from_pretrained(model, adapter)
            theirs = validation_loss(model, self.text)
            error = relative(theirs, ours)
            print(f"{family}: our eval of the LoRA checkpoint {ours!r}, peft {peft.__version__} "
                  f"with our adapters on our base {theirs!r} (the base alone {base_loss!r}): "
                  f"relative error {error:.2e} (bar {BAR[family]:.0e})")
            self.assertGreater(abs(theirs - base_loss), 1e3 * BAR[family] * base_loss)
            self.assertLess(error, BAR[family])

            merged = os.path.join(self.tmp, f"{family}-merged")
            self.ok("export", checkpoint, "-o", merged, "--format", "hf", "--merge-lora")
            merged_loss = validation_loss(
                transformers.AutoModelForCausalLM.from_pretrained(merged, **options(family)),
                self.text)
            error = relative(merged_loss, theirs)
            print(f"{family}: transformers on our --merge-lora export {merged_loss!r}, peft "
                  f"{theirs!r}: relative error {error:.2e}")
            self.assertLess(error, 1e-10)

    def test_an_adapter_peft_made_starts_a_run_here(self):
        for family in FAMILIES:
            config, base = self.base(family)
            model = transformers.AutoModelForCausalLM.from_pretrained(base, **options(family))
            model = peft.get_peft_model(model, peft.LoraConfig(
                r=4, lora_alpha=8, lora_dropout=0.0, target_modules=PEFT_TARGETS[family],
                target_parameters=PEFT_PARAMETERS.get(family), fan_in_fan_out=family == "gpt"))
            torch.manual_seed(0)
            with torch.no_grad():  # B away from zero, so that the adapters change the function
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0.0, 0.2)
            adapter = os.path.join(self.tmp, f"{family}-made-by-peft")
            model.save_pretrained(adapter)
            theirs = validation_loss(model, self.text)
            lora = ["--lora.rank=4", "--lora.alpha=8", f"--lora.targets={TARGETS[family]}",
                    f"--checkpoint.load=hf:{base}", f"--lora.adapter={adapter}"]
            ours = float(self.ok("eval", config, "--checkpoint", "hf:" + base, *lora,
                                 *hf_export.ONE_PROCESS).stdout.split()[-1])
            error = relative(ours, theirs)
            print(f"{family}: peft's own adapter ({sorted(os.listdir(adapter))}): peft "
                  f"{theirs!r}, our eval of it on hf:DIR {ours!r}: relative error {error:.2e} "
                  f"(bar {BAR[family]:.0e})")
            self.assertLess(error, BAR[family])
            dump = os.path.join(self.tmp, f"{family}-from-peft")
            trained = self.ok("train", config, f"--job.dump_folder={dump}", *lora)
            self.assertIn(f"adapters from {adapter}", trained.stderr)
            self.assertIn(f"step 0/2 | val_loss {ours:.4f}", trained.stderr)
            # A rank that cannot hold it is one line naming the key.
            wrong = run("eval", config, "--checkpoint", "hf:" + base, *lora, "--lora.rank=2",
                        *hf_export.ONE_PROCESS)
            self.assertEqual(wrong.returncode, 2, wrong.stderr[-3000:])
            self.assertIn("set lora.rank = 4", wrong.stderr)
            if family == "gpt":
                # peft's c_attn adapter adapts k too: a job without k's role would drop it.
                no_k = run("eval", config, "--checkpoint", "hf:" + base, *lora,
                           '--lora.targets=["q", "v", "o", "fc", "proj"]', *hf_export.ONE_PROCESS)
                self.assertEqual(no_k.returncode, 2, no_k.stderr[-3000:])
                self.assertIn("also adapts outputs that this job's lora.targets do not",
                              no_k.stderr)


if __name__ == "__main__":
    unittest.main()
