"""`vescale-train train` end to end on real processes: every layout reproduces the loss curve of
the 1-process run (docs/design.md §12), gradient accumulation equals one big batch, torchrun works, and
bad configs fail with one line that names the file and key, writing nothing."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from common import (BINARY, SYSTEM_PYTHON, free_port, max_relative, metrics_lines, run,
                    torchrun_missing, train_losses)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
def train(tmp, name, *overrides, config=CONFIG, steps=5, dtype="float64", nproc=None):
    """Runs a training job; returns the per-step losses from its metrics.jsonl."""
    args = [f"--training.steps={steps}", f"--training.dtype={dtype}", "--metrics.log_interval=1",
            "--eval.interval=0", *overrides] + (["--nproc", str(nproc)] if nproc else [])
    return train_losses(config, os.path.join(tmp, name), *args)


class LayoutParity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-train-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_float64_every_layout_matches_one_process(self):
        single = "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="
        reference = train(self.tmp, "ref64", *single)
        layouts = {
            "DP2": ("--parallel.dp=2", "--parallel.tp=1", "--parallel.plan=gpt/dp-only"),
            "TP2": ("--parallel.dp=1", "--parallel.tp=2", "--parallel.plan=gpt/megatron-tp"),
            "SP2": ("--parallel.dp=1", "--parallel.tp=2", "--parallel.plan=gpt/megatron-sp"),
            "DP2xTP2": ("--parallel.dp=2", "--parallel.tp=2", "--parallel.plan=gpt/megatron-tp"),
        }
        for name, overrides in layouts.items():
            losses = train(self.tmp, name + "-64", *overrides)
            err = max_relative(losses, reference)
            print(f"float64 {name}: {len(losses)} steps, max relative loss error {err:.3g}")
            self.assertEqual(len(losses), len(reference))
            self.assertLessEqual(err, 1e-10, name)
        self.check_dp_metrics(metrics_lines(os.path.join(self.tmp, "DP2-64"))[-1])

    def test_activation_checkpointing_on_processes(self):
        # dp2 x tp2 megatron-sp on 4 processes, float64 with dropout: bitwise the same losses,
        # and the activations each rank reports shrink.
        layout = ("--parallel.dp=2", "--parallel.tp=2", "--parallel.plan=gpt/megatron-sp",
                  "--model.dropout=0.1")
        runs = {mode: train(self.tmp, "ac-" + mode, *layout,
                            f"--training.activation_checkpoint={mode}", steps=4)
                for mode in ("none", "selective", "full")}
        activations = {mode: metrics_lines(os.path.join(self.tmp, "ac-" + mode))[-1]
                       ["state_bytes"]["activations"] for mode in runs}
        print(f"dp2 x tp2 sp, 4 processes: losses {runs['none']}; activations on rank 0 "
              f"{activations}")
        self.assertEqual(runs["selective"], runs["none"])
        self.assertEqual(runs["full"], runs["none"])
        self.assertLess(activations["full"], activations["selective"])
        self.assertLess(activations["selective"], activations["none"])

    def check_dp_metrics(self, metrics):
        """Rank 0 of a dp=2 run reports its dp bytes by collective kind and its measured
        activations."""
        print(f"DP2 comm_bytes_by_kind {metrics['comm_bytes_by_kind']}, state_bytes {metrics['state_bytes']}")
        dp = metrics["comm_bytes_by_kind"]["dp"]
        self.assertGreater(dp.get("all_reduce", 0), 0, metrics)
        self.assertEqual(sum(dp.values()), metrics["comm_bytes"]["dp"], metrics)
        self.assertGreater(metrics["state_bytes"].get("activations", 0), 0, metrics)

    def test_float32_twenty_steps(self):
        single = "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="
        reference = train(self.tmp, "ref32", *single, steps=20, dtype="float32")
        for name, overrides in {"DP2xTP2": (), "SP2": ("--parallel.dp=1", "--parallel.plan=gpt/megatron-sp")}.items():
            losses = train(self.tmp, name + "-32", *overrides, steps=20, dtype="float32")
            err = max_relative(losses, reference)
            print(f"float32 {name}: step-0 relative error {abs(losses[0] - reference[0]) / reference[0]:.3g}, "
                  f"max over 20 steps {err:.3g}")
            self.assertLessEqual(abs(losses[0] - reference[0]) / reference[0], 1e-6, name)
            self.assertLessEqual(err, 1e-4, name)

    def test_gradient_accumulation_equals_one_big_batch(self):
        one = train(self.tmp, "accum1", "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=")
        four = train(self.tmp, "accum4", "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=",
                     "--parallel.microbatches=4")
        err = max_relative(four, one)
        print(f"4 micro-batches vs 1 batch: max relative loss error {err:.3g}")
        self.assertLessEqual(err, 1e-10)
        mixed = train(self.tmp, "accum-dp2tp2", "--parallel.microbatches=2")
        err = max_relative(mixed, one)
        print(f"DP2xTP2 with 2 micro-batches vs 1 process: max relative loss error {err:.3g}")
        self.assertLessEqual(err, 1e-10)

    def test_sgd_with_momentum(self):
        single = "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=", "--optimizer.name=sgd"
        reference = train(self.tmp, "sgd-ref", *single)
        losses = train(self.tmp, "sgd-dp2tp2", "--optimizer.name=sgd")
        err = max_relative(losses, reference)
        print(f"float64 SGD DP2xTP2: max relative loss error {err:.3g}")
        self.assertLessEqual(err, 1e-10)

    def test_mlp_seed_plan(self):
        config = os.path.join(ROOT, "configs", "mlp-tp.toml")
        reference = train(self.tmp, "mlp-ref", "--parallel.tp=1", "--parallel.plan=", config=config)
        for plan in ["mlp/tp", "mlp/tp-sp"]:
            losses = train(self.tmp, "mlp-" + plan.replace("/", "-"), f"--parallel.plan={plan}", config=config)
            err = max_relative(losses, reference)
            print(f"float64 MLP {plan} tp=2: max relative loss error {err:.3g}")
            self.assertLessEqual(err, 1e-10)


class Launchers(unittest.TestCase):
    def test_torchrun_two_processes(self):
        missing = torchrun_missing()
        if missing:
            self.skipTest(missing)
        tmp = tempfile.mkdtemp(prefix="vescale-torchrun-")
        try:
            cmd = [SYSTEM_PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--no_python",
                   "--redirects", "1", "--tee", "1", "--master_port", str(free_port()), BINARY, "train", CONFIG,
                   "--parallel.dp=1", "--parallel.tp=2", f"--job.dump_folder={tmp}", "--training.steps=3",
                   "--metrics.log_interval=1"]
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            with open(os.path.join(tmp, "metrics.jsonl")) as f:
                self.assertEqual(len(f.readlines()), 3)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


    def test_slurm_variables(self):
        """Two processes started as Slurm would (srun sets SLURM_PROCID and SLURM_NTASKS)."""
        tmp = tempfile.mkdtemp(prefix="vescale-slurm-")
        try:
            port = free_port()
            procs = []
            for rank in range(2):
                env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank),
                           SLURM_NTASKS_PER_NODE="2", SLURM_JOB_NODELIST="localhost", MASTER_PORT=str(port))
                for var in ["RANK", "WORLD_SIZE", "MASTER_ADDR"]:
                    env.pop(var, None)
                procs.append(subprocess.Popen(
                    [BINARY, "train", CONFIG, "--parallel.dp=1", "--parallel.tp=2", f"--job.dump_folder={tmp}",
                     "--training.steps=2", "--metrics.log_interval=1"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for p in procs:
                _, err = p.communicate(timeout=300)
                self.assertEqual(p.returncode, 0, err[-2000:])
            with open(os.path.join(tmp, "metrics.jsonl")) as f:
                self.assertEqual(len(f.readlines()), 2)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class BadConfigs(unittest.TestCase):
    def check(self, config_text, needle, *extra, nproc=None, rule_text=None):
        tmp = tempfile.mkdtemp(prefix="vescale-bad-")
        try:
            path = os.path.join(tmp, "job.toml")
            dump = os.path.join(tmp, "out")
            with open(path, "w") as f:
                f.write(config_text.replace("DUMP", dump))
            args = ["train", path, *extra] + (["--nproc", str(nproc)] if nproc else [])
            result = run(*args, timeout=120)
            self.assertNotEqual(result.returncode, 0)
            lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn(needle.replace("PATH", path), lines[0])
            if rule_text:
                self.assertIn(rule_text, lines[0])
            self.assertFalse(os.path.exists(dump), "a failed config wrote its dump folder")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    BASE = '[job]\ndump_folder = "DUMP"\n[data]\nsource = "synthetic"\n'

    def test_unknown_key_names_file_line_and_suggestion(self):
        self.check(self.BASE + "[training]\nstpes = 3\n",
                   "config PATH:6: unknown key 'training.stpes' (did you mean 'training.steps'?)")

    def test_wrong_type(self):
        self.check(self.BASE + '[training]\nsteps = "ten"\n', "config PATH:6: key 'training.steps' must be an integer")
        self.check(self.BASE, "override --training.steps=abc: key 'training.steps' must be an integer",
                   "--training.steps=abc")

    def test_mesh_is_not_the_world(self):
        self.check(self.BASE + "[parallel]\ndp = 2\ntp = 2\n", "--nproc 3 does not match the mesh", nproc=3)

    def test_batch_not_divisible(self):
        self.check(self.BASE + "[parallel]\ndp = 3\n[training]\nglobal_batch_size = 8\n",
                   "training.global_batch_size = 8 is not divisible by parallel.dp x parallel.microbatches = 3 x 1")

    def test_missing_data_file(self):
        self.check('[job]\ndump_folder = "DUMP"\n[data]\nsource = "text"\npath = "/nonexistent/corpus.txt"\n',
                   'data.path /nonexistent/corpus.txt: cannot read it (No such file or directory)')

    def test_unknown_plan(self):
        self.check(self.BASE + '[parallel]\ntp = 2\nplan = "gpt/megatron-spp"\n', "did you mean 'gpt/megatron-sp'")

    def test_absurd_model_sizes_fail_at_once_naming_the_memory(self):
        for command in (["train"], ["plan", "lint"]):
            start = time.monotonic()
            tmp = tempfile.mkdtemp(prefix="vescale-bad-")
            try:
                path = os.path.join(tmp, "job.toml")
                with open(path, "w") as f:
                    f.write(self.BASE.replace("DUMP", os.path.join(tmp, "out")) +
                            "[model]\nn_layer = 1000000000\n")
                extra = ["--print-config"] if command == ["train"] else []
                result = run(*command, path, *extra, timeout=60)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            seconds = time.monotonic() - start
            print(f"\n[{' '.join(command)}] n_layer = 1e9: exit {result.returncode} in {seconds:.2f} s")
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("this model cannot fit", result.stderr)
            self.assertIn("model.n_layer = 1000000000", result.stderr)
            self.assertLess(seconds, 10)

    def test_inputs_that_are_not_regular_files_are_refused(self):
        tmp = tempfile.mkdtemp(prefix="vescale-bad-")
        try:
            fifo = os.path.join(tmp, "fifo.toml")
            os.mkfifo(fifo)
            big = os.path.join(tmp, "big.toml")
            with open(big, "w") as f:
                f.write("# padding\n" * (2 << 20))
            for path, needle in [(fifo, "is a FIFO"), ("/dev/zero", "is a character device"),
                                 (tmp, "is a directory"), (big, "is too large for a config")]:
                start = time.monotonic()
                result = run("train", path, "--print-config", timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(needle, result.stderr)
                self.assertLess(time.monotonic() - start, 10)
            result = run("plan", "show", "/dev/zero", timeout=60)
            self.assertNotEqual(result.returncode, 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_nonsensical_numbers_are_refused_at_their_line(self):
        # Issue [13]: each was accepted and failed later (a NaN, a hang, a fake val_loss 0.0000).
        cases = [("training", "grad_clip", "-1", ">= 0"), ("optimizer", "eps", "-1e-8", "> 0"),
                 ("optimizer", "eps", "0.0", "> 0"), ("optimizer", "weight_decay", "-0.1", ">= 0"),
                 ("optimizer", "beta1", "1.0", "in [0, 1)"), ("optimizer", "beta2", "2.0", "in [0, 1)"),
                 ("checkpoint", "keep", "-1", "in [0, "), ("checkpoint", "interval", "-5", "in [0, "),
                 ("comm", "bucket_mb", "-1.0", "in (0, "), ("lr_scheduler", "warmup_steps", "-3", "in [0, "),
                 ("model", "n_embd", "0", ">= 1"), ("eval", "windows", "0", ">= 1"),
                 ("model", "dropout", "1.0", "in [0, 1)"), ("parallel", "tp", "70000", "in [1, 65536]")]
        for section, key, value, rule in cases:
            with self.subTest(key=f"{section}.{key}", value=value):
                self.check(self.BASE + f"[{section}]\n{key} = {value}\n",
                           f"config PATH:6: {section}.{key} = ", rule_text=f"must be {rule}")
        self.check(self.BASE, "override --optimizer.beta2=2: optimizer.beta2 = 2 must be in [0, 1)",
                   "--optimizer.beta2=2")

    def test_a_mesh_this_machine_cannot_start_fails_at_once(self):
        start = time.monotonic()
        self.check(self.BASE, "needs 65536 local worker processes", "--parallel.tp=65536")
        print(f"\n--parallel.tp=65536 refused in {time.monotonic() - start:.2f} s")
        self.assertLess(time.monotonic() - start, 10)

    def test_an_empty_config_file_is_refused(self):
        self.check("", "config PATH is empty")

    def test_bad_placements_in_a_plan(self):
        tmp = tempfile.mkdtemp(prefix="vescale-bad-")
        try:
            plans = {
                "dup.json": ('{"model": "mlp", "parameter": {"fc1.weight": ["S(0)"], '
                             '"fc1.weight": ["R"]}}', "key 'fc1.weight' appears twice in one object"),
                "huge.json": ('{"model": "mlp", "parameter": {"fc1.weight": ["S(9223372036854775808)"]}}',
                              "bad placement 'S(9223372036854775808)'"),
                "fwd.json": ('{"model": "mlp", "forward": {"fc1.input": [["S(9)"]]}}',
                             "forward key 'fc1.input': S(9) shards dim 9, but the mlp model's module "
                             "inputs and outputs have at most 2 dims"),
            }
            for name, (text, needle) in plans.items():
                plan = os.path.join(tmp, name)
                with open(plan, "w") as f:
                    f.write(text)
                config = os.path.join(tmp, "job.toml")
                with open(config, "w") as f:
                    f.write(f'[model]\nname = "mlp"\n[parallel]\ntp = 2\nplan = "{plan}"\n')
                for command in (["plan", "lint", config], ["train", config]):
                    with self.subTest(plan=name, command=command[0]):
                        result = run(*command, timeout=60)
                        self.assertEqual(result.returncode, 2, result.stderr)
                        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
                        self.assertEqual(len(errors), 1, result.stderr)
                        self.assertIn(needle, errors[0])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_the_data_source_is_checked_by_lint_and_before_launch(self):
        tmp = tempfile.mkdtemp(prefix="vescale-bad-")
        try:
            ten = os.path.join(tmp, "ten.txt")
            with open(ten, "w") as f:
                f.write("ten bytes!")
            text = f'[data]\nsource = "text"\npath = "{ten}"\n'
            self.check(self.BASE.replace('[data]\nsource = "synthetic"\n', "") + text,
                       f"data.path {ten}: 10 bytes is too little text to train on", nproc=None)
            config = os.path.join(tmp, "job.toml")
            with open(config, "w") as f:
                f.write(text)
            result = run("plan", "lint", config, timeout=60)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("10 bytes is too little text", result.stderr)
            self.assertEqual(result.stdout, "", "lint printed a table before failing")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_command_line_mistakes_are_one_error_line_and_exit_2(self):
        for args in (["train"], ["train", "x.toml", "--nproc", "abc"], ["bogus"], ["plan", "show"],
                     ["merge"]):
            with self.subTest(args=args):
                result = run(*args, timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(len([l for l in result.stderr.splitlines() if l.startswith("error:")]),
                                 1, result.stderr)

    def test_a_failure_after_launch_leaves_no_metrics_file(self):
        tmp = tempfile.mkdtemp(prefix="vescale-bad-")
        try:
            dump = os.path.join(tmp, "out")
            config = os.path.join(tmp, "job.toml")
            with open(config, "w") as f:
                f.write(f'[job]\ndump_folder = "{dump}"\n[checkpoint]\nload = "{tmp}/missing"\n')
            result = run("train", config, timeout=60)
            self.assertNotEqual(result.returncode, 0)
            self.assertFalse(os.path.exists(os.path.join(dump, "metrics.jsonl")), result.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_cuda_without_a_gpu(self):
        version = run("--version").stdout
        if "GPU(s) visible" in version:
            self.skipTest("a GPU is visible: " + version.splitlines()[1])
        self.check(self.BASE, "training.device = 'cuda', but no GPU is visible", "--training.device=cuda")
        if "CPU only" in version:
            self.check(self.BASE, "comm.backend = 'nccl', but this build has no NCCL", "--comm.backend=nccl")
        else:  # a CUDA build on a machine without a GPU: NCCL is built in but has nothing to run on
            self.assertIn("no GPU visible", version)
            self.check(self.BASE, "comm.backend = 'nccl', but this process sees no GPU", "--comm.backend=nccl")
        self.check(self.BASE + '[training]\ndevice = "gpu"\n',
                   'training.device = "gpu" is not one of auto, cpu, cuda')


class Version(unittest.TestCase):
    def test_version_names_libtorch_and_fast_paths(self):
        result = run("--version")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("LibTorch ", result.stdout)
        self.assertIn("fast paths built in: ", result.stdout)
        # NOTE [GPU-verified]: a line a kernel row, each CUDA row with its GPU run or none.
        self.assertIn("\n  attention: fused attention: CUDA, ", result.stdout)
        self.assertRegex(result.stdout, r"\n  attention: fused attention: CUDA, .*GPU-verified "
                                        r"\d{4}-\d\d-\d\d NVIDIA ")
        self.assertIn("\n  LM loss: widened log-softmax loss: CUDA, not yet run on a GPU\n",
                      result.stdout)
        self.assertIn("\n  LM loss: pass-by-pass loss: any device", result.stdout)

    def test_training_logs_its_device_and_fast_paths(self):
        tmp = tempfile.mkdtemp(prefix="vescale-device-")
        try:
            result = run("train", CONFIG, "--parallel.dp=1", "--parallel.tp=1", "--training.steps=1",
                         "--training.device=cpu", f"--job.dump_folder={tmp}")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("[device] rank 0 computes on cpu (training.device = cpu), comm backend gloo; "
                          "fused attention off", result.stderr)
            # The MFU's peak, measured on the CPU (NOTE [MFU peak]), and the kernel rows taken.
            self.assertRegex(result.stderr, r"\[mfu\] peak [0-9.e+-]+ TFLOP/s per rank: [0-9.e+-]+ "
                                            r"GFLOP/s a core \(its best one-thread float32 matmul\) "
                                            r"x [0-9.]+ cores? a rank")
            self.assertRegex(result.stderr, r"\[kernels\] rank 0 took: .*explicit attention|"
                                            r"\[kernels\] rank 0 took: .*blocked attention")
            # NOTE [GPU-verified]: the opt-in is said where the device is (CPU rows run here).
            opted = run("train", CONFIG, "--parallel.dp=1", "--parallel.tp=1", "--training.steps=1",
                        "--training.device=cpu", "--training.unverified_kernels=true",
                        f"--job.dump_folder={tmp}/opted")
            self.assertEqual(opted.returncode, 0, opted.stderr)
            self.assertIn("; kernel rows no GPU has run are taken (training.unverified_kernels = "
                          "true)", opted.stderr)
            self.assertNotIn("rows no GPU has run are taken", result.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class PlanCommand(unittest.TestCase):
    def test_list_show_lint(self):
        listing = run("plan", "list")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        for name in ["mlp/tp", "mlp/tp-sp", "gpt/megatron-tp", "gpt/megatron-sp", "gpt/dp-only"]:
            self.assertIn(name, listing.stdout)
        show = run("plan", "show", "gpt/megatron-sp", "--tp", "4")
        self.assertEqual(show.returncode, 0, show.stderr)
        self.assertIn("transformer.h.0.attn.q_proj.weight", show.stdout)
        self.assertIn("[S(0)]", show.stdout)
        self.assertIn("hook transformer.h.0.attn.input", show.stdout)
        lint = run("plan", "lint", CONFIG)
        self.assertEqual(lint.returncode, 0, lint.stderr)
        self.assertIn("ok: gpt on tp=2 with plan gpt/megatron-tp", lint.stdout)
        bad = run("plan", "lint", CONFIG, "--parallel.plan=gpt/megatron-spp")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("did you mean 'gpt/megatron-sp'", bad.stderr)


if __name__ == "__main__":
    unittest.main()
