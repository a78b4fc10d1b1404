"""`vescale-train export --format hf` end to end: a GPT and two Llamas train 2 float64 steps on
dp=2 x tp=2 (a sharded checkpoint), a Mixtral (each expert its own tensors, under Hugging Face's
names) on dp=2 with its experts over ep=2 and ZeRO-3, are exported as Hugging Face folders, and an
independent reader and reference implementation (hf_reference.py: Python over the safetensors
bytes, not our C++) computes the validation loss that `vescale-train eval` computes on the
checkpoint: float64 within 1e-10, a float32 export within 1e-5. Sharded exports (an index and
several files) read the same; bf16 exports hold BF16 tensors; bad arguments are one-line errors.
Import ("hf:DIR" as eval's checkpoint and as checkpoint.load) gives back bitwise the exported
parameters and eval's loss, and a config.json of another model is refused naming the key and both
values; a Mixtral folder missing one expert's tensor is refused naming it, and a Mixtral with a
shared expert (none in Hugging Face's) is not exported."""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

from common import BINARY, SYSTEM_PYTHON, run

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "hf_reference.py")
SEQ, WINDOWS, VAL_FRACTION = 16, 4, 0.25

FAMILIES = {
    "gpt": """
[model]
name = "gpt"
vocab_size = 256
vocab_multiple = 48
block_size = 16
n_layer = 2
n_head = 4
n_embd = 16
[parallel]
plan = "gpt/megatron-sp"
""",
    "llama": """
[model]
name = "llama"
vocab_size = 256
vocab_multiple = 48
block_size = 16
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 16
intermediate_size = 24
rope_theta = 500.0
[parallel]
plan = "llama/megatron-sp"
""",
    "llama-tied": """
[model]
name = "llama"
vocab_size = 256
block_size = 16
n_layer = 2
n_head = 2
n_kv_head = 1
n_embd = 16
intermediate_size = 24
tie_embeddings = true
[parallel]
plan = "llama/megatron-tp"
""",
    "mixtral": """
[model]
name = "mixtral"
vocab_size = 256
vocab_multiple = 48
block_size = 16
n_layer = 2
n_head = 4
n_kv_head = 2
n_embd = 16
intermediate_size = 24
num_experts = 4
experts_per_token = 2
rope_theta = 500.0
[parallel]
plan = "mixtral/dp-only"
""",
}
# eval on one process, whatever layout trained the checkpoint.
ONE_PROCESS = ("--parallel.dp=1", "--parallel.ep=1", "--parallel.tp=1", "--parallel.zero=0",
               "--parallel.plan=")
# The mixtral checkpoint: its experts held over ep (NOTE [Expert parallelism]), the rest sharded
# by ZeRO-3 over dp.
LAYOUT = {"mixtral": "dp = 2\nep = 2\nzero = 3\n"}
COMMON = f"""
[parallel]
dp = 2
tp = 2
[data]
source = "text"
path = "{{text}}"
val_fraction = {VAL_FRACTION}
[training]
steps = 2
global_batch_size = 4
seq_len = {SEQ}
dtype = "float64"
[optimizer]
lr = 0.01
[eval]
interval = 0
windows = {WINDOWS}
[checkpoint]
interval = 2
format = "sharded"
"""


def config_text(family, text_path):
    # The family's [parallel] plan joins the common [parallel] table (its own dp and tp, if any).
    model, plan = FAMILIES[family].split("[parallel]")
    common = COMMON.replace("{text}", text_path)
    if family in LAYOUT:
        common = common.replace("dp = 2\ntp = 2\n", LAYOUT[family], 1)
    return model + common.replace("[parallel]\n", "[parallel]" + plan, 1)


def reference_losses(text, *exports):
    """The reference's loss on each (folder, dtype) in `exports`, in one process."""
    import subprocess
    out = subprocess.run([SYSTEM_PYTHON, REFERENCE, text, str(SEQ), str(WINDOWS),
                          str(VAL_FRACTION), *(x for pair in exports for x in pair)],
                         check=True, capture_output=True, text=True)
    losses = [float(line) for line in out.stdout.split()]
    assert len(losses) == len(exports), out.stdout
    return losses


def header_dtypes(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


class HFExport(unittest.TestCase):
    # One training run per family for the whole class (each method used to train its own, the
    # same run up to 4 times): nothing writes into a trained run's folder, and each method's
    # exports go to a folder of its own.
    @classmethod
    def setUpClass(cls):
        cls.shared = tempfile.mkdtemp(prefix="vescale-hf-runs-")
        cls.text = os.path.join(cls.shared, "text.txt")
        with open(cls.text, "w") as f:  # varied enough that a loss means something
            for i in range(400):
                f.write(f"line {i}: the {i * 7 % 13}th fox jumps over {i * 3 % 11} lazy dogs.\n")
        cls.runs, cls.exports, cls.evals = {}, {}, {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.shared, ignore_errors=True)

    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="vescale-hf-")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def trained(self, family):
        if family not in self.runs:
            config = os.path.join(self.shared, f"{family}.toml")
            with open(config, "w") as f:
                f.write(config_text(family, self.text))
            dump = os.path.join(self.shared, family)
            result = run("train", config, f"--job.dump_folder={dump}", timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.runs[family] = config, os.path.join(dump, "checkpoints", "latest")
        return self.runs[family]

    def exported(self, family, dtype):
        """The class's export of `family`'s run in `dtype` (made once: nothing writes into it)."""
        if (family, dtype) not in self.exports:
            _, checkpoint = self.trained(family)
            self.exports[(family, dtype)] = self.export(checkpoint, f"{family}-{dtype}", "--dtype", dtype,
                                                        folder=self.shared)
        return self.exports[(family, dtype)]

    def evaluated(self, family):
        """`vescale-train eval` of `family`'s run on one process (run once for the class)."""
        if family not in self.evals:
            config, checkpoint = self.trained(family)
            result = run("eval", config, "--checkpoint", checkpoint, *ONE_PROCESS, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.evals[family] = float(result.stdout.split()[-1])
        return self.evals[family]

    def export(self, checkpoint, name, *args, folder=None):
        """Exports `checkpoint` as folder/name (this test's folder by default)."""
        out = os.path.join(folder or self.folder, name)
        result = run("export", checkpoint, "-o", out, "--format", "hf", *args, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        print(result.stdout.strip())
        return out

    def test_reference_implementations_compute_evals_loss(self):
        evals, exports = {}, []
        for family in FAMILIES:
            config, checkpoint = self.trained(family)
            evals[family] = self.evaluated(family)
            exports += [(self.exported(family, "float64"), "float64"),
                        (self.exported(family, "float32"), "float32"),
                        (self.export(checkpoint, f"{family}-sharded", "--dtype", "float64",
                                     "--max-shard-size", "8K"), "float64")]
        references = reference_losses(self.text, *exports)  # one process for all of them
        for i, family in enumerate(FAMILIES):
            ours = evals[family]
            f64, f32, sharded = references[3 * i:3 * i + 3]
            sharded_dir = exports[3 * i + 2][0]
            e64, e32 = abs(f64 - ours) / ours, abs(f32 - ours) / ours
            print(f"{family}: eval {ours!r}; reference on the export: float64 {f64!r} "
                  f"(relative error {e64:.2e}), float32 {f32!r} ({e32:.2e}), sharded {sharded!r}")
            self.assertLess(e64, 1e-10)
            self.assertLess(e32, 1e-5)
            self.assertEqual(sharded, f64)
            files = sorted(os.listdir(sharded_dir))
            self.assertIn("model.safetensors.index.json", files)
            self.assertIn("model-00001-of-", " ".join(files))
            with open(os.path.join(sharded_dir, "config.json")) as f:
                self.assertEqual(json.load(f)["torch_dtype"], "float64")

    def test_bf16_export_and_bad_arguments(self):
        _, checkpoint = self.trained("llama")
        bf16 = self.export(checkpoint, "bf16", "--dtype", "bfloat16")
        self.assertEqual(header_dtypes(os.path.join(bf16, "model.safetensors")), {"BF16"})
        again = run("export", checkpoint, "-o", bf16, "--format", "hf")
        self.assertEqual(again.returncode, 2)
        self.assertIn("not overwriting", again.stderr)
        for args, message in ((["--format", "onnx"], "--format onnx is not known"),
                              (["--dtype", "int8"], "--dtype int8 is not one of")):
            result = run("export", checkpoint, "-o", os.path.join(self.folder, "x"), *args)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(message, result.stderr)

    def test_import_gives_back_the_exported_model(self):
        for family in ("llama", "llama-tied", "gpt", "mixtral"):
            config, checkpoint = self.trained(family)
            exported = self.exported(family, "float64")
            one = ONE_PROCESS
            result = run("eval", config, "--checkpoint", "hf:" + exported, *one, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            losses = [self.evaluated(family), float(result.stdout.split()[-1])]
            print(f"{family}: eval of the checkpoint {losses[0]!r}, of hf:DIR {losses[1]!r}")
            self.assertEqual(losses[0], losses[1])
            # generate takes hf:DIR too: the same greedy tokens.
            texts = []
            for source in (checkpoint, "hf:" + exported):
                result = subprocess.run([BINARY, "generate", config, "--checkpoint", source, *one,
                                         "--greedy", "--max-new-tokens", "6"],
                                        capture_output=True, timeout=300)  # any bytes
                self.assertEqual(result.returncode, 0, result.stderr[-3000:])
                texts.append(result.stdout)
            self.assertEqual(texts[0], texts[1], family)
            # Training from hf:DIR with lr = 0 saves the imported parameters as they are.
            dump = os.path.join(self.folder, f"{family}-from-hf")
            result = run("train", config, f"--job.dump_folder={dump}",
                         f"--checkpoint.load=hf:{exported}", "--optimizer.lr=0",
                         "--training.steps=1", "--checkpoint.interval=1",
                         "--checkpoint.format=merged", timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.assertIn("the optimizer starts fresh", result.stderr)
            merged = os.path.join(self.folder, f"{family}-merged.h5")
            self.assertEqual(run("merge", checkpoint, "-o", merged).returncode, 0)
            after = os.path.join(dump, "checkpoints", "step-000001", "model.h5")
            differ = system_python(
                "import h5py, numpy, sys\n"
                f"a, b = h5py.File({merged!r})['model'], h5py.File({after!r})['model']\n"
                "for n in a:\n"
                "    x, y = a[n][()], b[n][()]\n"
                "    rows = min(len(x), 256) if 'embed' in n or 'wte' in n or 'lm_head' in n "
                "else len(x)\n"
                "    if not numpy.array_equal(x[:rows], y[:rows]): print(n)\n")
            self.assertEqual(differ.strip(), "", f"{family}: parameters that differ")

    def test_import_refuses_a_config_of_another_model(self):
        config, _ = self.trained("llama")
        exported = self.exported("llama", "float32")
        result = run("eval", config, "--checkpoint", "hf:" + exported, "--model.n_layer=3")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("num_hidden_layers = 2, but this job's model.n_layer = 3", result.stderr)
        result = run("eval", config, "--checkpoint", "hf:" + os.path.join(self.folder, "none"))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("no such folder", result.stderr)

    def test_mixtral_export_layout_and_refusals(self):
        config, checkpoint = self.trained("mixtral")
        exported = self.export(checkpoint, "mixtral-hf", "--dtype", "float32")
        with open(os.path.join(exported, "config.json")) as f:
            hf = json.load(f)
        self.assertEqual(hf["architectures"], ["MixtralForCausalLM"])
        for key, value in (("model_type", "mixtral"), ("num_local_experts", 4),
                           ("num_experts_per_tok", 2), ("hidden_act", "silu"),
                           ("sliding_window", None), ("output_router_logits", False),
                           ("tie_word_embeddings", False), ("num_key_value_heads", 2)):
            self.assertEqual(hf[key], value, key)
        weights = os.path.join(exported, "model.safetensors")
        with open(weights, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        moe = "model.layers.1.block_sparse_moe."
        self.assertEqual(header[moe + "gate.weight"]["shape"], [4, 16])
        self.assertEqual(header[moe + "experts.3.w1.weight"]["shape"], [24, 16])
        self.assertEqual(header[moe + "experts.3.w2.weight"]["shape"], [16, 24])
        self.assertEqual(header[moe + "experts.3.w3.weight"]["shape"], [24, 16])
        self.assertNotIn(moe + "experts.w1", header)
        # Another number of experts is another model.
        result = run("eval", config, "--checkpoint", "hf:" + exported, "--model.num_experts=8")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("num_local_experts = 4, but this job's model.num_experts = 8", result.stderr)
        # A file without one expert's tensor is refused naming it.
        missing = moe + "experts.2.w3.weight"
        system_python(
            "import json, struct, sys\n"
            f"path, gone = {weights!r}, {missing!r}\n"
            "data = open(path, 'rb').read()\n"
            "(n,) = struct.unpack('<Q', data[:8])\n"
            "header = json.loads(data[8:8 + n])\n"
            "del header[gone]\n"
            "text = json.dumps(header).encode()\n"
            "open(path, 'wb').write(struct.pack('<Q', len(text)) + text + data[8 + n:])\n")
        result = run("eval", config, "--checkpoint", "hf:" + exported)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(f"no tensor {missing}", result.stderr)
        # Hugging Face's Mixtral has no shared expert: such a model is not exported.
        dump = os.path.join(self.folder, "mixtral-shared")
        result = run("train", config, f"--job.dump_folder={dump}", "--model.shared_expert=true",
                     timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        result = run("export", os.path.join(dump, "checkpoints", "latest"), "-o",
                     os.path.join(self.folder, "shared-hf"), "--format", "hf")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("model.shared_expert = true has no Hugging Face counterpart", result.stderr)


def system_python(script):
    import subprocess
    return subprocess.run([SYSTEM_PYTHON, "-c", script], check=True, capture_output=True,
                          text=True).stdout


if __name__ == "__main__":
    unittest.main()
