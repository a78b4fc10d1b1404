"""gpucheck.table: the table's sections, the bench rows and bars, the summary line."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck.table import Report, bench_row, within_bar  # noqa: E402

FIGURES = dict(who="vescale-train", tokens_per_s=21656.4, median_step_ms=23.64, mfu=None,
               peak_alloc_bytes=None, peak_reserved_bytes=None, warmup_s=0.031, loss_first=5.5912,
               loss_last=5.0771, phases_ms=dict(fwd=8.94, bwd=11.1, sync=0.0, opt=3.1, other=0.12))


class Bars(unittest.TestCase):
    def test_within_bar(self):
        self.assertTrue(within_bar("0.00e+00", "1e-10"))
        self.assertTrue(within_bar("1.00e-10", "1e-10"))
        self.assertFalse(within_bar("1.01e-10", "1e-10"))
        self.assertTrue(within_bar("0", "0"))
        self.assertFalse(within_bar("1", "0"))
        # a reason in the figure's cell is never within the bar
        self.assertFalse(within_bar("19 of 20 steps to compare", "1e-10"))
        self.assertFalse(within_bar("", "1e-4"))


class BenchRows(unittest.TestCase):
    def test_cpu_row_without_gpu_figures(self):
        self.assertEqual(bench_row(FIGURES, "-", 1e6, 0.0),
                         "| vescale-train | 21,656 | - | 23.6 | - | - | - | 0.03 | 5.591 → 5.077 | "
                         "fwd 8.9 bwd 11.1 sync 0.0 opt 3.1 other 0.1 |")

    def test_gpu_row_with_mfu_and_memory(self):
        figures = dict(FIGURES, peak_alloc_bytes=3 * 2**30, peak_reserved_bytes=2**31)
        del figures["phases_ms"]  # a peer's row: no phases
        row = bench_row(figures, "8192", 6e8, 989e12).split(" | ")
        self.assertEqual(row[2], f"{100 * 6e8 * 21656.4 / 989e12:.1f}%")
        self.assertEqual(row[4:7], ["3.00 GiB", "2.00 GiB", "8.00 GiB"])
        self.assertEqual(row[-1], "- |")

    def test_own_mfu_where_the_model_is_not_counted(self):
        row = bench_row(dict(FIGURES, mfu=0.1461), "-", 0, 0).split(" | ")
        self.assertEqual(row[2], "14.6% (its own)")
        self.assertEqual(bench_row(FIGURES, "-", 0, 0).split(" | ")[2], "-")


class Tables(unittest.TestCase):
    def test_summary_counts_each_outcome(self):
        report = Report("gpu")
        for verdict in ("ok", "ok", "FAIL", "skipped", "skipped", "skipped"):
            report.tally(verdict)
        self.assertEqual(report.summary(), "gpu-check: 2 passed, 1 failed, 3 skipped")

    def test_empty_sections_leave_no_lines(self):
        report = Report("gpu", header=["gpu-check 2026-12-02 19:52 UTC", "command: x"])
        report.add("build", "build: skipped (VESCALE_TRAIN=v)", "skipped")
        self.assertEqual(report.text(), "gpu-check 2026-12-02 19:52 UTC\ncommand: x\n\n"
                         "build: skipped (VESCALE_TRAIN=v)\n\n"
                         "gpu-check: 0 passed, 0 failed, 1 skipped\n")

    def test_sections_in_order_with_their_headers(self):
        report = Report("cpu", header=["h"], bench_title="bench-small float32")
        report.add("stages", "ranks: skipped: --cpu", "skipped")
        report.add("profile", "profile: ok", "ok")
        report.add("bench", "| torch-eager | skipped: why |", "skipped")
        report.add("mfu", "mfu: ok", "ok")
        report.add("kernel_tests", "kernel test: AdamW: skipped: no GPU", "skipped")
        report.add("kernels", "kernels: rows the passing cuda* runs took: add")
        report.add("parity", "| gpt | 0.00e+00 | 1e-10 | ok |", "ok")
        report.add("build", "build: skipped", "skipped")
        lines = report.text().splitlines()
        self.assertEqual(lines[:5], ["h", "", "build: skipped", "ranks: skipped: --cpu", ""])
        self.assertEqual(lines[5:10], ["| parity: max relative difference | figure | bar | result |",
                                       "| --- | --- | --- | --- |", "| gpt | 0.00e+00 | 1e-10 | ok |",
                                       '(* --cpu: the "cuda" side ran on the CPU)', ""])
        self.assertEqual(lines[10:14], ["kernels: rows the passing cuda* runs took: add", "",
                                        "kernel test: AdamW: skipped: no GPU", ""])
        self.assertTrue(lines[14].startswith("| bench: bench-small float32 | tokens/s | MFU | "))
        self.assertTrue(lines[14].endswith(" | phases, median ms on the host's clock |"))
        self.assertEqual(lines[15], "| --- " * 10 + "|")
        self.assertEqual(lines[16:], ["| torch-eager | skipped: why |", "", "mfu: ok", "",
                                      "profile: ok", "", "gpu-check: 3 passed, 0 failed, 4 skipped"])

    def test_gpu_parity_has_no_cpu_note(self):
        report = Report("gpu")
        report.add("parity", "| gpt | 1 | 0 | FAIL |", "FAIL")
        self.assertNotIn("--cpu", report.text())
        self.assertEqual(report.failed, 1)


if __name__ == "__main__":
    unittest.main()
