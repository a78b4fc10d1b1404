"""gpucheck.options: the command line, what --stages picks, and where paths point."""
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck import options  # noqa: E402
from gpucheck.options import UsageError, parse  # noqa: E402


class Parse(unittest.TestCase):
    def test_defaults(self):
        got = parse([])
        self.assertEqual((got.mode, got.out_dir, got.help), ("gpu", "", False))
        self.assertEqual(got.stages, "build,parity,ranks,kernels,bench,profile")

    def test_values_in_both_spellings(self):
        got = parse(["--cpu", "--stages", "parity,bench", "--out=/tmp/x"])
        self.assertEqual((got.mode, got.stages, got.out_dir), ("cpu", "parity,bench", "/tmp/x"))
        got = parse(["--stages=profile", "--out", "here"])
        self.assertEqual((got.stages, got.out_dir), ("profile", "here"))

    def test_wanted(self):
        got = parse(["--stages", "parity,bench"])
        self.assertTrue(got.wanted("bench"))
        self.assertFalse(got.wanted("build"))
        self.assertFalse(got.wanted("ben"))  # a stage by its whole name

    def test_wrong_options(self):
        with self.assertRaisesRegex(UsageError, r"^unknown option --gpu \(see --help\)$"):
            parse(["--gpu"])
        with self.assertRaisesRegex(UsageError, r"^--out needs a value"):
            parse(["--cpu", "--out"])
        with self.assertRaisesRegex(UsageError, r"^unknown stage 'bogus' \(build, parity, ranks, "
                                    r"kernels, bench, profile\)$"):
            parse(["--stages", "parity,bogus"])

    def test_help_stops_at_once(self):
        self.assertTrue(parse(["--cpu", "-h", "--bogus"]).help)
        with self.assertRaises(UsageError):  # a wrong option before it still counts
            parse(["--bogus", "--help"])


class Paths(unittest.TestCase):
    def test_from_caller(self):
        self.assertEqual(options.from_caller("/abs/dir", "/work"), "/abs/dir")
        self.assertEqual(options.from_caller("out", "/work/tests"), "/work/tests/out")

    def test_binary_path(self):
        self.assertEqual(options.binary_path("gpu", {}, "/c"), "build-cuda/vescale-train")
        self.assertEqual(options.binary_path("cpu", {}, "/c"), "build/vescale-train")
        self.assertEqual(options.binary_path("cpu", {"BUILD_DIR": "b2"}, "/c"), "b2/vescale-train")
        self.assertEqual(options.binary_path("cpu", {"VESCALE_TRAIN": "bin/v"}, "/c"), "/c/bin/v")
        self.assertEqual(options.binary_path("gpu", {"VESCALE_TRAIN": "sh"}, "/c"),
                         shutil.which("sh"))  # a name on PATH
        self.assertEqual(options.binary_path("gpu", {"VESCALE_TRAIN": "no-such-tool-x"}, "/c"),
                         "no-such-tool-x")


if __name__ == "__main__":
    unittest.main()
