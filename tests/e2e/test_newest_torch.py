"""scripts/check-newest-torch.sh: every object file of vescale-train (the library, our CUDA kernels,
the binary, the tests, the benchmarks) compiles against the headers and CMake config of the newest
PyTorch that PyPI serves (python/newest-torch.txt), C++20, no warning. A long-tier test: ~540 MB
fetched once and 8.5 minutes of compiling cold on 2 cores, so it runs when the build's files change
(tests/long_tier.txt); the wheel check (scripts/test-wheel.sh) compiles and tests PyTorch 2.11 on
every change."""
import os
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check-newest-torch.sh")


class NewestTorch(unittest.TestCase):
    def test_every_object_file_compiles(self):
        # The build folder stays beside the others (git ignores build*/), so a second run compiles
        # only what changed.
        env = dict(os.environ, BUILD_DIR=os.path.join(ROOT, "build-newest-torch"))
        done = subprocess.run(["bash", SCRIPT], env=env, cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3000)
        print(done.stdout[-4000:])
        self.assertEqual(done.returncode, 0, done.stdout[-4000:])
        self.assertRegex(done.stdout, r"every object file compiles against torch \d+\.\d+\.\d+: 0 warnings")


if __name__ == "__main__":
    unittest.main()
