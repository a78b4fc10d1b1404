"""Checkpoint integrity end to end (NOTE [Checkpoint integrity]): checksums verified on load and by
`inspect --verify`, the run id in every rank file, numeric step order, range-checked metadata,
temporaries that never follow a planted symbolic link, file modes, and the folder lock."""
import fcntl
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import unittest

from common import BINARY, SYSTEM_PYTHON, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
FAST = ("--metrics.log_interval=1", "--eval.interval=0", "--eval.windows=1")
TENSOR = "model/transformer.h.0.attn.q_proj.weight"

# h5py edits of checkpoint files, run under the system python: EDIT <files> <what> <args>, the files
# joined by os.pathsep; one process for all of them (h5py's import is most of its time).
H5_EDIT = r"""
import os, sys, h5py, numpy as np
def crc32c(data):
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    crc = 0xFFFFFFFF
    for x in data:
        crc = (crc >> 8) ^ table[(crc ^ x) & 0xFF]
    return crc ^ 0xFFFFFFFF
paths, what, args = sys.argv[1].split(os.pathsep), sys.argv[2], sys.argv[3:]
for path in paths:
    f = h5py.File(path, 'r' if what in ('offset', 'crc', 'meta') else 'r+')
    if what == 'offset':      # file offset of a dataset's raw bytes
        print(f[args[0]].id.get_offset())
    elif what == 'crc':       # stored and recomputed checksum of a dataset
        d = f[args[0]]
        print(int(d.attrs['crc32c']), crc32c(d[()].tobytes()))
    elif what == 'meta':      # a /meta attribute
        v = f['meta'].attrs[args[0]]
        print(v.decode() if isinstance(v, bytes) else v)
    elif what == 'set_meta':
        f['meta'].attrs[args[0]] = np.int64(int(args[1]))
    elif what == 'set_attr':  # dataset attribute as int64 list
        f[args[0]].attrs[args[1]] = np.array([int(x) for x in args[2].split(',')], dtype=np.int64)
    elif what == 'del_attr':
        del f[args[0]].attrs[args[1]]
    elif what == 'to_v1':     # strip what version 2 added
        f['meta'].attrs['format_version'] = np.int64(1)
        del f['meta'].attrs['run_id']
        def strip(name, obj):
            if isinstance(obj, h5py.Dataset) and 'crc32c' in obj.attrs:
                del obj.attrs['crc32c']
        f.visititems(strip)
    elif what == 'to_int32':  # the dataset stored as int32, its checksum recomputed
        d = f[args[0]]
        attrs = dict(d.attrs)
        values = d[()].astype(np.int32)
        del f[args[0]]
        n = f.create_dataset(args[0], data=values)
        for k, v in attrs.items():
            n.attrs[k] = v
        n.attrs['crc32c'] = np.int64(crc32c(values.tobytes()))
    f.close()
"""


def h5(path, what, *args):
    result = subprocess.run([SYSTEM_PYTHON, "-c", H5_EDIT, path, what, *args], capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return result.stdout.strip()


def h5_each(step, what, *args):
    """h5() on every rank file of `step` in one process: a line of output a file."""
    paths = [os.path.join(step, name) for name in rank_files(step)]
    lines = h5(os.pathsep.join(paths), what, *args).splitlines()
    assert what not in ("offset", "crc", "meta") or len(lines) == len(paths), lines
    return lines


def train(folder, *overrides, steps=4, umask=None):
    env = dict(os.environ)
    return subprocess.run([os.environ.get("VESCALE_TRAIN", "vescale-train"), "train", CONFIG,
                           f"--job.dump_folder={folder}", f"--training.steps={steps}",
                           "--checkpoint.interval=2", "--checkpoint.keep=0", *FAST, *overrides],
                          capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def rank_files(step):
    return sorted(f for f in os.listdir(step) if f.endswith(".h5"))


class CheckpointIntegrity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-integrity-")
        cls.run_a = os.path.join(cls.tmp, "a")
        result = train(cls.run_a)
        assert result.returncode == 0, result.stderr[-3000:]
        cls.ckpt = os.path.join(cls.run_a, "checkpoints")
        cls.step4 = os.path.join(cls.ckpt, "step-000004")
        cls.step2 = os.path.join(cls.ckpt, "step-000002")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy(self, source, name):
        target = os.path.join(self.tmp, name)
        shutil.copytree(source, target, symlinks=True)
        return target

    def refused(self, args, *expected):
        result = run(*args)
        self.assertNotEqual(result.returncode, 0, f"{args} was not refused")
        for text in expected:
            self.assertIn(text, result.stderr + result.stdout)
        return (result.stderr + result.stdout).strip().splitlines()[-1]

    # 1. Checksums
    def test_checksums_are_written_and_verified(self):
        stored, recomputed = map(int, h5(os.path.join(self.step4, "rank-00001.h5"), "crc", TENSOR).split())
        self.assertEqual(stored, recomputed)
        result = run("inspect", "--verify", self.ckpt)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("checksums OK", result.stdout)
        print(f"crc32c of {TENSOR} in rank-00001.h5: stored {stored:08x} = python's {recomputed:08x}; "
              f"{result.stdout.strip()}")

        bad = self.copy(self.step4, "corrupt")
        victim = os.path.join(bad, "rank-00001.h5")
        offset = int(h5(victim, "offset", "/" + TENSOR))
        with open(victim, "r+b") as f:
            f.seek(offset + 5)
            byte = f.read(1)
            f.seek(offset + 5)
            f.write(bytes([byte[0] ^ 0x01]))
        named = f"rank-00001.h5: tensor /{TENSOR} fails its checksum"
        line = self.refused(("inspect", "--verify", bad), named)
        print(f"one flipped bit at byte {offset + 5}: inspect --verify exits non-zero: {line}")
        self.refused(("merge", bad, "-o", os.path.join(self.tmp, "corrupt.h5")), named)
        result = train(os.path.join(self.tmp, "from-corrupt"), f"--checkpoint.load={bad}", steps=6)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(named, result.stderr)
        print("loading it in train fails naming the file and the tensor")

        # A file without checksums (format version 1) still loads, with a warning; a version 2 file
        # whose checksum was removed does not.
        old = self.copy(self.step4, "v1")
        h5_each(old, "to_v1")
        result = run("inspect", "--verify", old)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("carry no checksums and are not verified", result.stderr)
        stripped = self.copy(self.step4, "stripped")
        h5(os.path.join(stripped, "rank-00002.h5"), "del_attr", TENSOR, "crc32c")
        self.refused(("inspect", "--verify", stripped), f"tensor /{TENSOR} has no checksum")
        print("version 1 files (no checksums) verify with a warning; a v2 dataset without one is refused")

    # 2. Run id
    def test_run_id_in_every_file_and_kept_on_resume(self):
        ids = set(h5_each(self.step2, "meta", "run_id") + h5_each(self.step4, "meta", "run_id"))
        self.assertEqual(len(ids), 1, ids)
        run_id = ids.pop()
        self.assertRegex(run_id, r"^[0-9a-f]{16}$")
        folder = self.copy(self.run_a, "resume-here")
        result = train(folder, "--checkpoint.load=latest", steps=6)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        step6 = os.path.join(folder, "checkpoints", "step-000006")
        resumed = set(h5_each(step6, "meta", "run_id"))
        self.assertEqual(resumed, {run_id})
        print(f"run {run_id}: in all 4 rank files of steps 2 and 4, and of step 6 after resuming in place")

        # A new run in that folder is refused, or with checkpoint.overwrite replaces the old steps.
        result = train(folder, steps=2)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(os.path.join(folder, "checkpoints") + " holds 3 committed steps of another run",
                      result.stderr)
        self.assertIn("checkpoint.overwrite = true", result.stderr)
        result = train(folder, "--checkpoint.overwrite=true", steps=2)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        left = sorted(d for d in os.listdir(os.path.join(folder, "checkpoints")) if d.startswith("step-"))
        self.assertEqual(left, ["step-000002"])
        other = os.path.join(folder, "checkpoints", "step-000002")
        new_id = h5(os.path.join(other, "rank-00000.h5"), "meta", "run_id")
        self.assertNotEqual(new_id, run_id)
        print(f"a new run there is refused; with checkpoint.overwrite it runs as {new_id} and the old steps are gone")

        # Rank files of another step or another run are refused, naming the file.
        mixed = self.copy(self.step4, "mixed-step")
        shutil.copy(os.path.join(self.step2, "rank-00003.h5"), mixed)
        self.refused(("inspect", mixed), "rank-00003.h5 is not part of the checkpoint", "step 2")
        mixed_run = self.copy(self.step2, "mixed-run")
        shutil.copy(os.path.join(other, "rank-00001.h5"), mixed_run)
        line = self.refused(("inspect", mixed_run), "rank-00001.h5 is not part of the checkpoint", new_id)
        print(f"a rank file of another run: {line}")

    # 3. Numeric step order
    def test_step_folders_order_by_number(self):
        ckpt = self.copy(self.ckpt, "numeric")
        for name in ["step-999999", "step-1000000"]:
            shutil.copytree(os.path.join(ckpt, "step-000004"), os.path.join(ckpt, name))
        result = run("inspect", ckpt)
        self.assertEqual(result.returncode, 0, result.stderr)
        first = result.stdout.splitlines()[0]
        self.assertTrue(first.startswith(os.path.join(ckpt, "step-1000000") + ":"), first)
        print(f"latest of step-999999 and step-1000000: {first.split(':')[0]}")

    # 4. Metadata ranges
    def test_metadata_is_range_checked(self):
        cases = [("negative step", "set_meta", ["step", "-1"], "/meta step is -1"),
                 ("absurd world size", "set_meta", ["world_size", str(1 << 40)], "outside [1, 1048576]"),
                 ("negative dim", "set_attr", ["/" + TENSOR, "global_shape", "-32,32"], "a negative dim"),
                 # 2^80 elements, which an int64 product wraps to 0 (checkpoints refused it
                 # before; safetensors said "(0 bytes)": Safetensors.DamagedFiles...).
                 ("2^80 elements", "set_attr", ["/" + TENSOR, "global_shape", f"{1 << 40},{1 << 40}"],
                  "global_shape [1099511627776, 1099511627776]: a negative dim, or over "
                  "1099511627776 elements"),
                 ("offset out of range", "set_attr", ["/" + TENSOR, "global_offset", "1000000,0"],
                  "outside its global_shape")]
        for label, what, args, expected in cases:
            bad = self.copy(self.step4, "range-" + label.replace(" ", "-"))
            h5_each(bad, what, *args)
            line = self.refused(("inspect", bad), expected)
            print(f"{label}: {line}")
        # Another file count than world_size: an extra rank file.
        extra = self.copy(self.step4, "range-extra")
        shutil.copy(os.path.join(extra, "rank-00000.h5"), os.path.join(extra, "rank-00004.h5"))
        print("extra rank file:", self.refused(("inspect", extra), "rank-00004.h5 is not the file of one of the 4 ranks"))
        # A dataset stored as int32 is not cast into the float model.
        int32 = self.copy(self.step4, "int32")
        h5_each(int32, "to_int32", "/" + TENSOR)
        result = train(os.path.join(self.tmp, "from-int32"), f"--checkpoint.load={int32}", steps=6)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"tensor {TENSOR} is stored as Int but the model's is Float", result.stderr)
        print(f"int32 dataset: refused naming {TENSOR}, Int and Float")
        # A model-only file does not resume training with a fresh optimizer.
        model_only = os.path.join(self.tmp, "model-only.h5")
        self.assertEqual(run("merge", self.step4, "-o", model_only, "--model-only").returncode, 0)
        result = train(os.path.join(self.tmp, "from-model-only"), f"--checkpoint.load={model_only}", steps=6)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("no optimizer state for this job's optimizer", result.stderr)
        print("model-only checkpoint: training refuses to resume with a fresh optimizer")

    # 5. Files
    def test_planted_links_are_never_followed_and_modes(self):
        folder = os.path.join(self.tmp, "planted")
        step = os.path.join(folder, "checkpoints", "step-000002")
        os.makedirs(step)
        victims = {}
        for link in [os.path.join(step, "rank-00000.h5.tmp"), os.path.join(step, "COMMIT.tmp"),
                     os.path.join(folder, "checkpoints", "latest.tmp")]:
            victim = os.path.join(self.tmp, "victim-" + os.path.basename(link))
            with open(victim, "w") as f:
                f.write("precious")
            os.symlink(victim, link)
            victims[victim] = link
        result = train(folder, steps=2, umask=0)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        for victim in victims:
            with open(victim) as f:
                self.assertEqual(f.read(), "precious", f"{victims[victim]} was written through")
        self.assertTrue(os.path.exists(os.path.join(step, "COMMIT")))
        modes = {}
        for root, dirs, files in os.walk(os.path.join(folder, "checkpoints")):
            for name in dirs + files:
                path = os.path.join(root, name)
                modes[os.path.relpath(path, folder)] = os.lstat(path).st_mode & 0o777
        loose = {p: oct(m) for p, m in modes.items() if m & 0o022}
        self.assertEqual(loose, {}, "group- or world-writable under umask 0")
        print(f"3 planted links left untouched; under umask 0 the modes are {sorted(set(map(oct, modes.values())))}")

        # merge -o never writes through a link at the output or at its temporary.
        out = os.path.join(self.tmp, "merged-out.h5")
        target = os.path.join(self.tmp, "merge-target")
        os.symlink(target, out)  # dangling
        self.refused(("merge", self.step4, "-o", out), "exists; not overwriting it")
        self.assertFalse(os.path.exists(target))
        out2 = os.path.join(self.tmp, "merged-out2.h5")
        victim = os.path.join(self.tmp, "victim-merge")
        with open(victim, "w") as f:
            f.write("precious")
        os.symlink(victim, out2 + ".tmp")
        result = run("merge", self.step4, "-o", out2)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")
        print("merge -o: a link at the output is refused; one at its temporary is replaced, not followed")

    # 6. Lock
    def test_second_job_on_a_folder_is_refused(self):
        folder = os.path.join(self.tmp, "locked")
        os.makedirs(folder)
        lock = os.path.join(folder, "LOCK")
        with open(lock, "w") as f:
            f.write("host otherhost pid 4242\n")
            f.flush()
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            result = train(folder, steps=2)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("is locked by another job (host otherhost pid 4242)", result.stderr)
            print("while another process holds LOCK:",
                  [l for l in result.stderr.splitlines() if "locked" in l][0].strip())
        # The holder is gone: its LOCK file is no obstacle, and the job records itself in it.
        result = train(folder, steps=2)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        with open(lock) as f:
            owner = f.read().strip()
        self.assertRegex(owner, r"^host \S+ pid \d+$")
        print(f"stale LOCK (holder gone): the job runs; LOCK said '{owner}'")



def train_within_file_size(limit_bytes, *args):
    """vescale-train train CONFIG ARGS with files limited to `limit_bytes`: writes past it fail as
    on a full disk (SIGXFSZ ignored: EFBIG), with no root and no tmpfs."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run([BINARY, "train", CONFIG, *args, *FAST], preexec_fn=limit,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


class FullDisk(unittest.TestCase):
    def test_a_full_disk_is_a_clean_error_and_nothing_is_committed(self):
        # Issue [13]: the error was clean, then HDF5's exit handler segfaulted (exit 139); before
        # that, a failed flush went unnoticed and the truncated file was committed.
        tmp = tempfile.mkdtemp(prefix="vescale-full-")
        try:
            result = train_within_file_size(100_000, f"--job.dump_folder={tmp}",
                                            "--training.steps=4", "--checkpoint.interval=2")
            errors = [l for l in result.stderr.splitlines() if "error:" in l]
            print(f"\nfile size limit 100 kB: exit {result.returncode}; {errors[:1]}")
            self.assertEqual(result.returncode, 1, result.stderr[-2000:])
            self.assertTrue(any("is the disk full?" in l and "rank-0000" in l for l in errors),
                            result.stderr[-2000:])
            root = os.path.join(tmp, "checkpoints")
            committed = [d for d in os.listdir(root)
                         if os.path.exists(os.path.join(root, d, "COMMIT"))]
            self.assertEqual(committed, [])
            self.assertFalse(os.path.exists(os.path.join(root, "latest")))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_a_full_disk_for_metrics_is_said_not_silent(self):
        tmp = tempfile.mkdtemp(prefix="vescale-full-")
        try:
            result = train_within_file_size(1024, f"--job.dump_folder={tmp}", "--training.steps=4",
                                            "--parallel.dp=1", "--parallel.tp=1")
            said = [l for l in result.stderr.splitlines() if "metrics: writing" in l]
            print(f"\nmetrics.jsonl over a 1 kB file size limit: exit {result.returncode}; {said}")
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            self.assertEqual(len(said), 1, result.stderr[-2000:])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
