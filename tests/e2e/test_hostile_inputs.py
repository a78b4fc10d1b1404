"""[26]: what a hostile-user probe found, each a one-line error and exit 2 with nothing written and
no process left behind, or the right behaviour: generate's NaN sampling values, a negative seed,
empty prompts, a non-token model and more samples than memory; --profile steps beyond int64 and a
trace path that is a folder; activation_checkpoint_every past the blocks; flight recorders beyond
2^20 entries; byte sizes beyond 8 PiB; output files named bare or as folders (plan auto -o, comm
bench --calibrate) and a calibration from one size; diagnose on a huge rank, a FIFO, a folder, a
dump of another rank, negative ranks and two runs' dumps; Hugging Face folders with integer or
NaN weights, a tensor the model has no place for, a number given as a string and an n_inner of
another model; checkpoint rank files that are FIFOs or folders; an immutable dump folder; a
resume under another seed; local launches that cannot fit this machine, refused
with one message; and a plan auto stopped while it calibrates, which leaves no process behind."""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

from common import BINARY, TINY_GPT_TWO_STEPS, run, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "configs", "mlp-tp.toml")

CONFIG_TEXT = TINY_GPT_TWO_STEPS


def dump_text(rank, groups, run_id="00000000000000aa"):
    return json.dumps({"format": "vescale-train flight recorder 1", "rank": rank, "run_id": run_id,
                       "reason": "test", "now_s": 1.0, "groups": groups, "entries": []})


def processes_naming(text):
    """PIDs of processes whose command line holds `text`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def safetensors(path):
    """(header dict, data offset, raw bytes) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), 8 + n, bytearray(raw)


def write_safetensors(path, header, raw, start):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(raw[start:]))


class HostileInputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-hostile-")
        cls.config = write_config(cls.tmp, CONFIG_TEXT)
        cls.trained = os.path.join(cls.tmp, "trained")
        result = run("train", cls.config, f"--job.dump_folder={cls.trained}")
        assert result.returncode == 0, result.stderr[-3000:]
        cls.step = os.path.join(cls.trained, "checkpoints", "step-000002")
        cls.hf = os.path.join(cls.tmp, "hf")
        result = run("export", cls.step, "-o", cls.hf, "--format", "hf", "--dtype", "float32")
        assert result.returncode == 0, result.stderr[-3000:]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def one_error(self, *args, cwd=None, needle, timeout=120):
        """vescale-train ARGS in `cwd` (a fresh folder by default): exit 2, one error line
        holding `needle`, nothing written in `cwd`."""
        cwd = cwd or tempfile.mkdtemp(dir=self.tmp)
        before = sorted(os.listdir(cwd))
        result = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout,
                                cwd=cwd)
        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        print(f"{' '.join(args)[-60:]}: exit {result.returncode}: {errors[:1]}")
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        self.assertEqual(len(errors), 1, result.stderr[-3000:])
        self.assertIn(needle, errors[0])
        self.assertEqual(sorted(os.listdir(cwd)), before, "an error wrote files")
        return errors[0]

    def generate(self, *args, needle):
        return self.one_error("generate", self.config, "--checkpoint", self.step,
                              "--max-new-tokens=2", *args, needle=needle)

    def test_generate_values(self):
        self.generate("--top-p", "nan", needle="'nan' is not a finite number in [1e-09, 1]")
        self.generate("--temperature", "nan", needle="'nan' is not a finite number")
        self.generate("--temperature", "inf", needle="'inf' is not a finite number")
        self.generate("--seed", "-1", needle="'-1' is not a whole number in [0, 2^64 - 1]")
        self.generate("--prompt-ids", "", needle="--prompt-ids: no token ids")
        self.generate("--num-samples", "65536", "--model.block_size=1000000",
                      "--training.seq_len=16", needle="their KV caches and logits need about")
        self.one_error("generate", MLP, "--checkpoint", self.step,
                       needle='which predicts no tokens')

    def test_profile_and_recompute_and_sizes(self):
        self.one_error("train", self.config, "--job.dump_folder=out",
                       "--profile", "99999999999999999999-1", needle="is too large")
        folder = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(folder, "out", "trace.json"))
        self.one_error("train", self.config, "--job.dump_folder=out", "--profile", "1",
                       cwd=folder, needle="trace.json is a folder")
        self.one_error("train", self.config, "--job.dump_folder=out",
                       "--training.activation_checkpoint=full",
                       "--training.activation_checkpoint_every=3", needle="none would recompute")
        self.one_error("train", self.config, "--job.dump_folder=out",
                       "--comm.flight_recorder_entries=16777216",
                       needle="comm.flight_recorder_entries")
        line = self.one_error("plan", "lint", self.config, "--model.n_embd=9223372036854775807",
                              "--model.n_head=1", needle="cannot fit")
        self.assertNotIn("-9223372036854775808", line)
        self.one_error("plan", "auto", self.config, "--nproc", "2", "--memory-per-rank",
                       "99999999999G", needle="is too large: at most 8 PiB")

    def test_output_files(self):
        folder = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(folder, "calib.json"))
        self.one_error("comm", "bench", "--sizes", "1K", "--calibrate", "c.json",
                       needle="give --sizes two sizes or more")
        self.one_error("comm", "bench", "--calibrate", "calib.json", cwd=folder,
                       needle="calib.json: a folder")
        os.makedirs(os.path.join(folder, "best.toml"))
        self.one_error("plan", "auto", self.config, "--nproc", "2", "-o", "best.toml", cwd=folder,
                       needle="best.toml: a folder")
        # A bare file name is written in the current folder.
        bare = tempfile.mkdtemp(dir=self.tmp)
        result = subprocess.run([BINARY, "comm", "bench", "--sizes", "1K,64K", "--ops",
                                 "all_reduce", "--calibrate", "calib.json"], cwd=bare,
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(os.listdir(bare), ["calib.json"])

    def diagnose(self, files, needle):
        folder = tempfile.mkdtemp(dir=self.tmp)
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        return self.one_error("diagnose", folder, needle=needle)

    def test_diagnose_dumps(self):
        world = [{"label": "world", "key": "w", "ranks": [0, 1], "rank": 0, "collectives": 3,
                  "transfers": 0}]
        # A rank of 10^9 in a group: no billion-rank loop (this used to take 24 GB).
        huge = [{"label": "world", "key": "w", "ranks": [0, 1000000000], "rank": 0,
                 "collectives": 3, "transfers": 0}]
        folder = tempfile.mkdtemp(dir=self.tmp)
        with open(os.path.join(folder, "rank-0.json"), "w") as f:
            f.write(dump_text(0, huge))
        result = subprocess.run([BINARY, "diagnose", folder], capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("rank 1000000000 wrote no dump", result.stdout)
        self.diagnose({"rank-0.json": dump_text(1, world)},
                      needle="says it is rank 1's dump, but its name says rank 0")
        neg = [dict(world[0], ranks=[0, -5])]
        self.diagnose({"rank-0.json": dump_text(0, neg)}, needle="has a negative rank -5")
        self.diagnose({"rank-0.json": dump_text(0, world),
                       "rank-1.json": dump_text(1, world, run_id="00000000000000bb")},
                      needle="the folder holds dumps of two runs")
        fifo = tempfile.mkdtemp(dir=self.tmp)
        os.mkfifo(os.path.join(fifo, "rank-0.json"))
        self.one_error("diagnose", fifo, needle="is a FIFO; give a regular file", timeout=30)
        folder = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(folder, "rank-0.json"))
        self.one_error("diagnose", folder, needle="is a directory; give a regular file", timeout=30)

    def hf_copy(self):
        folder = tempfile.mkdtemp(dir=self.tmp)
        for name in os.listdir(self.hf):
            shutil.copy(os.path.join(self.hf, name), folder)
        return folder

    def test_hugging_face_folders(self):
        name = "transformer.wpe.weight"
        folder = self.hf_copy()
        path = os.path.join(folder, "model.safetensors")
        header, start, raw = safetensors(path)
        header[name]["dtype"] = "I32"
        write_safetensors(path, header, raw, start)
        self.one_error("eval", self.config, "--checkpoint", "hf:" + folder,
                       needle=f"tensor {name} holds Int integers")
        folder = self.hf_copy()
        path = os.path.join(folder, "model.safetensors")
        header, start, raw = safetensors(path)
        at = start + header[name]["data_offsets"][0]
        raw[at:at + 4] = struct.pack("<f", float("nan"))
        write_safetensors(path, header, raw, start)
        self.one_error("eval", self.config, "--checkpoint", "hf:" + folder,
                       needle=f"tensor {name} holds NaN or infinite values")
        # A tensor the model has no place for (a 3rd block of a 2-block model) is refused; a
        # buffer GPT-2 files carry (attn.bias) is read past.
        for extra, needle in (("transformer.h.2.attn.c_proj.bias", "has no place in this job's"),
                              ("transformer.h.0.attn.bias", None)):
            folder = self.hf_copy()
            path = os.path.join(folder, "model.safetensors")
            header, start, raw = safetensors(path)
            end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
            header[extra] = {"dtype": "F32", "shape": [2], "data_offsets": [end, end + 8]}
            write_safetensors(path, header, raw[:start + end] + struct.pack("<2f", 0, 0), start)
            if needle:
                self.one_error("eval", self.config, "--checkpoint", "hf:" + folder, needle=needle)
            else:
                result = run("eval", self.config, "--checkpoint", "hf:" + folder)
                self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        for key, value, needle in (("n_embd", "16", 'n_embd is "16", a string'),
                                   ("n_inner", 5, "n_inner = 5, but this job's 4 x model.n_embd "
                                                  "= 64")):
            folder = self.hf_copy()
            with open(os.path.join(folder, "config.json")) as f:
                config = json.load(f)
            config[key] = value
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(config, f)
            self.one_error("eval", self.config, "--checkpoint", "hf:" + folder, needle=needle)

    def test_resume_under_another_seed(self):
        folder = tempfile.mkdtemp(dir=self.tmp)
        dump = os.path.join(folder, "run")
        shutil.copytree(self.trained, dump)
        result = run("train", self.config, f"--job.dump_folder={dump}",
                     "--checkpoint.load=latest", "--training.steps=4", "--training.seed=7")
        self.assertEqual(result.returncode, 2, result.stderr[-2000:])
        self.assertIn("training.seed = 7 in this job's config, but the checkpoint's run was "
                      "trained with training.seed = 0", result.stderr)

    def test_checkpoint_files_that_are_not_files(self):
        # A rank file replaced by a FIFO (an open would wait for a writer) or a folder.
        for kind in ("fifo", "folder"):
            step = os.path.join(tempfile.mkdtemp(dir=self.tmp), "step-000002")
            shutil.copytree(self.step, step)
            victim = sorted(f for f in os.listdir(step) if f.endswith(".h5"))[0]
            os.remove(os.path.join(step, victim))
            if kind == "fifo":
                os.mkfifo(os.path.join(step, victim))
            else:
                os.mkdir(os.path.join(step, victim))
            self.one_error("eval", self.config, "--checkpoint", step, timeout=60,
                           needle=f"{victim}: is a")

    def test_immutable_dump_folder(self):
        # chattr +i: not even root may create files in it (where chattr works: root, ext4/xfs).
        dump = tempfile.mkdtemp(dir=self.tmp)
        if shutil.which("chattr") is None:
            self.skipTest("no chattr here (e2fsprogs)")
        if subprocess.run(["chattr", "+i", dump], capture_output=True).returncode != 0:
            self.skipTest("chattr +i is refused here (not root, or a file system without it)")
        try:
            self.one_error("train", self.config, f"--job.dump_folder={dump}",
                           needle=f"{dump}/LOCK: Operation not permitted")
            self.one_error("train", self.config, f"--job.dump_folder={dump}/run",
                           needle=f"cannot create the folder {dump}/run: Operation not permitted")
        finally:
            subprocess.run(["chattr", "-i", dump])

    def test_plan_auto_stopped_leaves_no_process(self):
        dump = tempfile.mkdtemp(dir=self.tmp)
        proc = subprocess.Popen([BINARY, "plan", "auto", self.config, "--nproc", "2",
                                 f"--job.dump_folder={dump}"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        for line in proc.stdout:
            if line.startswith("calibration 1 of"):
                break
        time.sleep(1.0)  # the calibration's launcher and its workers are running
        self.assertTrue(processes_naming(dump), "no calibration process seen")
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
        deadline = time.monotonic() + 10
        while processes_naming(dump) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(processes_naming(dump), [])

    def test_local_launches_that_cannot_fit(self):
        for args in (("comm", "bench", "--nproc", "4096"),
                     ("plan", "auto", self.config, "--nproc", "4096")):
            self.one_error(*args, needle="needs 4096 local worker processes, at least 512GiB in all")


if __name__ == "__main__":
    unittest.main()
