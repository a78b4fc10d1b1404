"""The stages' decisions: warning sites of a build log, kernel test logs, the kernel rows the
passing runs took (NOTE [GPU-verified]), and parity rows from two runs' metrics."""
import contextlib
import io
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck import kernel_rows  # noqa: E402
from gpucheck.stages import kernels, parity  # noqa: E402
from gpucheck.stages.build import warning_sites  # noqa: E402
from gpucheck_fakes import LogsTestCase  # noqa: E402

ROOT = "/src/vescale"


class BuildWarnings(unittest.TestCase):
    def test_sites_of_ours_and_of_headers(self):
        log = "\n".join([
            f"In file included from {ROOT}/lib/dtensor/redistribute.cpp:3:",
            "/usr/include/c10/util/Half.h:40:1: warning: unused [-Wunused-variable]",
            f"{ROOT}/models/gpt.cpp:12:5: warning: comparison [-Wsign-compare]",
            "/usr/include/fmt/core.h:9:2: warning: deprecated [-Wdeprecated-declarations]",
            f"{ROOT}/models/gpt.cpp:12:5: warning: comparison [-Wsign-compare]",  # said twice
            f"{ROOT}/app/main.cpp:7:1: warning: no flag here"])
        self.assertEqual(warning_sites(log, ROOT + "/"),
                         "-Wunused-variable at lib/dtensor/redistribute.cpp:3, "
                         "-Wsign-compare at models/gpt.cpp:12, "
                         "-Wdeprecated-declarations at a library header, warning at app/main.cpp:7")

    def test_at_most_five_and_none(self):
        log = "\n".join(f"{ROOT}/lib/a.cpp:{n}:1: warning: x [-Wshadow]" for n in range(1, 8))
        self.assertEqual(warning_sites(log, ROOT).count("-Wshadow"), 5)
        self.assertEqual(warning_sites("[100%] Built target vescale-train\n", ROOT), "")
        # a path outside this tree is no site of ours
        self.assertEqual(warning_sites("/other/lib/a.cpp:1:1: warning: x [-Wshadow]", ROOT),
                         "-Wshadow at a library header")


SKIPPED_LOG = """\
[ RUN      ] Tables/KernelTableOnCuda.EveryPathMatchesTheExplicitOne/AdamW
tests/kernels/kernel_table_test.cpp:80: Skipped
no GPU: the CUDA paths (fused attention and AdamW where LibTorch has them, at::linear, TF32 matmuls) run where one is
[  SKIPPED ] Tables/KernelTableOnCuda.EveryPathMatchesTheExplicitOne/AdamW (0 ms)
[  PASSED  ] 0 tests.
[  SKIPPED ] 1 test, listed below:
"""
PASSED_LOG = """\
[ RUN      ] CudaKernels.SwigluPastOneGrid
[kernels] SwiGLU bf16 on cuda: max |difference| 3.1e-03 (bar 1e-02)
[kernels] SwiGLU float32 on cuda: same bits
[       OK ] CudaKernels.SwigluPastOneGrid (12 ms)
[  PASSED  ] 1 test.
"""


class KernelTests(unittest.TestCase):
    def test_filter(self):
        self.assertEqual(kernels.test_filter("Swiglu"), "Tables/KernelTableOnCuda.EveryPathMatches"
                         "TheExplicitOne/Swiglu:CudaKernels.Swiglu*")
        self.assertTrue(kernels.test_filter("MoeExperts").endswith(":CudaKernels.GroupedGemm*"))

    def test_skipped_with_its_reason(self):
        rows, verdict = kernels.test_rows("AdamW", 0, SKIPPED_LOG)
        self.assertEqual(verdict, "skipped")
        self.assertEqual(rows, ["kernel test: AdamW: skipped: no GPU: the CUDA paths (fused attention "
                                "and AdamW where LibTorch has them, at::l"])

    def test_passed_cases(self):
        rows, verdict = kernels.test_rows("Swiglu", 0, PASSED_LOG)
        self.assertEqual(verdict, "ok")
        self.assertEqual(rows, ["kernel test: [kernels] SwiGLU bf16 on cuda: max |difference| "
                                "3.1e-03 (bar 1e-02)",
                                "kernel test: [kernels] SwiGLU float32 on cuda: same bits",
                                "kernel test: Swiglu: 2 cases, each within its bar: ok"])

    def test_failure_names_its_first_failure_line(self):
        log = PASSED_LOG.replace("[  PASSED  ] 1 test.", "CUDA error: an illegal memory access\n"
                                 "[  FAILED  ] 1 test")
        rows, verdict = kernels.test_rows("Swiglu", 134, log)
        self.assertEqual(verdict, "FAIL")
        self.assertEqual(rows[-1], "kernel test: Swiglu: FAIL: exit 134 (logs/kernel_test_Swiglu.log): "
                         "CUDA error: an illegal memory access")

    def test_a_skip_among_passes_is_no_skip(self):
        log = PASSED_LOG + "[  SKIPPED ] 1 test, listed below:\n"
        self.assertEqual(kernels.test_rows("Swiglu", 0, log)[1], "ok")


VERSION = """\
vescale-train 0.1.0 LibTorch 2.11.0 (CUDA 13.0)
kernel table:
  attention: fused attention: CUDA, GPU-verified 2026-11-27 NVIDIA H100 80GB HBM3
  linear: at::linear: CUDA, GPU-verified 2026-11-27 NVIDIA H100 80GB HBM3
  swiglu: SwiGLU kernel: CUDA, nvcc, not yet run on a GPU
  rotary: rotary kernel: CUDA, nvcc, not yet run on a GPU
  attention: explicit attention: any device
"""


class GpuVerified(unittest.TestCase):
    def test_taken_rows(self):
        logs = ["[12:00] info [kernels] rank 0 took: mm + bias add, at::linear, SwiGLU kernel\n",
                "[kernels] rank 1 took: rotary kernel\n"
                "[kernels] rank 0 took: add, then norm, at::linear"]
        self.assertEqual(kernel_rows.taken(logs), ["SwiGLU kernel", "add", "at::linear",
                                                   "mm + bias add", "then norm"])

    def test_device_side_runs(self):
        self.assertEqual([r for r in ("dev64", "cpu64", "llama_devbf16", "gloo_dp2", "resume_cpu64")
                          if kernel_rows.is_device_side(r)], ["dev64", "llama_devbf16"])

    def test_cuda_rows_of_the_version(self):
        self.assertEqual([name for name, _ in kernel_rows.cuda_rows(VERSION)],
                         ["fused attention", "at::linear", "SwiGLU kernel", "rotary kernel"])

    def test_gpu_lines(self):
        rows = kernel_rows.cuda_rows(VERSION)
        lines = kernel_rows.lines("gpu", ["SwiGLU kernel", "at::linear"], rows, "2026-12-02",
                                  "NVIDIA H200")
        self.assertEqual(lines, [
            "kernels: rows the passing cuda runs took: SwiGLU kernel, at::linear",
            "kernels: CUDA rows verified again: at::linear",
            'kernels: CUDA rows verified for the first time: SwiGLU kernel (write {"2026-12-02", '
            '"NVIDIA H200"} as their gpu_run in lib/kernels/kernel_table.cpp)',
            "kernels: CUDA rows no passing run took: fused attention, rotary kernel"])

    def test_cpu_lines(self):
        lines = kernel_rows.lines("cpu", [], kernel_rows.cuda_rows(VERSION))
        self.assertEqual(lines, ["kernels: rows the passing cuda* runs took: none",
                                 "kernels: CUDA rows (--cpu: none taken here): fused attention, "
                                 "at::linear, SwiGLU kernel, rotary kernel"])


class ParityRows(LogsTestCase):
    def curve(self, name, losses):
        self.write(f"{name}.jsonl", "".join(json.dumps(dict(step=i + 1, loss=x)) + "\n"
                                            for i, x in enumerate(losses)))

    def compare(self, *args):
        with contextlib.redirect_stdout(io.StringIO()):
            parity.compare(self.check, *args)
        return self.check.report.parity[-1]

    def test_within_the_bar_verifies_the_run(self):
        self.curve("cpu64", [2.0, 1.0])
        self.curve("dev64", [2.0, 1.0 + 1e-12])
        self.assertEqual(self.compare("gpt float64", "1e-10", "cpu64", "dev64", 1, 2),
                         "| gpt float64 | 1.00e-12 | 1e-10 | ok |")
        self.assertEqual(self.check.verified_runs, ["dev64"])
        self.assertEqual(self.check.report.passed, 1)

    def test_past_the_bar_fails(self):
        self.curve("cpu32", [2.0, 1.0])
        self.curve("devbf16", [2.0, 1.05])
        self.assertEqual(self.compare("gpt bf16", "2e-2", "cpu32", "devbf16", 1, 2),
                         "| gpt bf16 | 5.00e-02 | 2e-2 | FAIL |")
        self.assertEqual((self.check.verified_runs, self.check.report.failed), ([], 1))

    def test_a_failed_run_says_why(self):
        self.curve("cpu64", [2.0, 1.0])
        self.curve("dev64", [2.0, 1.0])
        self.write("dev64.log", "[kernels] rank 0 took: x\nterminate called after throwing\n")
        self.check.run_failed["dev64"] = 134
        self.assertEqual(self.compare("gpt float64", "1e-10", "cpu64", "dev64", 1, 2),
                         "| gpt float64 | dev64 exited 134: terminate called after throwing | "
                         "1e-10 | FAIL |")

    def test_too_few_steps(self):
        self.curve("cpu64", [2.0, 1.0])
        self.curve("resume_cpu64", [2.0])
        self.assertEqual(self.compare("resume", "1e-10", "cpu64", "resume_cpu64", 11, 10),
                         "| resume | 0 of 10 steps to compare | 1e-10 | FAIL |")


if __name__ == "__main__":
    unittest.main()
