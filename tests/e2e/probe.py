"""A test case for the hostile-user probes' findings ([36], [43]): the real binary run in a
folder of files the test makes, and its refusals held to one `error:` line, exit 2, and every
file in the folder as it was."""
import os
import shutil
import subprocess
import tempfile
import unittest

from common import BINARY


def snapshot(folder):
    """Every path under `folder`: a file's bytes, a link's target, or "folder"."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                out[path] = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[path] = f.read()
            else:
                out[path] = "folder"
    return out


class ProbeCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-probe-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def folder_with(self, files):
        """A fresh folder holding `files` (name -> str or bytes)."""
        folder = tempfile.mkdtemp(dir=self.tmp)
        for name, content in files.items():
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            mode = "wb" if isinstance(content, bytes) else "w"
            with open(os.path.join(folder, name), mode) as f:
                f.write(content)
        return folder

    def run_in(self, folder, *args, env=None):
        return subprocess.run([BINARY, *args], capture_output=True, text=True, errors="replace",
                              timeout=300, cwd=folder, env=env)

    def one_error(self, folder, *args, needle, env=None):
        """vescale-train ARGS in `folder`: exit 2, one error line holding `needle`, the folder as
        it was (no file written, none changed)."""
        before = snapshot(folder)
        result = self.run_in(folder, *args, env=env)
        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        print(f"{' '.join(args)[-70:]}: exit {result.returncode}: {errors[:1]}")
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        self.assertEqual(len(errors), 1, result.stderr[-3000:])
        self.assertIn(needle, errors[0])
        self.assertNotIn("Internal:", result.stderr)
        self.assertNotIn("character_coverage", result.stderr)
        self.assertEqual(snapshot(folder), before, "an error wrote or changed files")
        return errors[0]

    def ok(self, folder, *args, env=None):
        result = self.run_in(folder, *args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result
