"""kernels: the kernel table's rows on CUDA against the CPU's explicit rows
(tests/kernels/kernel_table_test.cpp's KernelTableOnCuda) and our CUDA kernels at the shapes and
inputs the table's test never gives them (tests/kernels/cuda_kernels_test.cpp), a process a
kernel (NOTE [Kernel tests a process each]) under CUDA_LAUNCH_BLOCKING=1: a sticky CUDA error
fails its kernel's row and names it, and the next kernel still runs. A row a case with its error;
then vescale-kernel-speed (bench/kernel_speed.cpp): each of our rows against its fallback,
forward and backward, with a rate and whether it may be verified. On the GPU machine the test
binary is built in build-cuda from those two files alone (VESCALE_TEST_FILES: a minute, not the
suite's ten); --cpu runs the build's own binaries, where the tests skip (no GPU) and the speed
rows time the fallbacks alone, at small shapes."""
import os
import re

from gpucheck import logfiles, machine, runs
from gpucheck.stages.build import executable

GROUPS = ("Attention", "AdamW", "Linear", "MatmulPrecision", "LmLoss", "Swiglu", "Rotary",
          "AddNorm", "MoeExperts")
CASE = re.compile(r"^\[[^\]]+\] .*(on cuda|max \|difference\||same bits|relative difference)")
SKIP_REASON = re.compile(r'(no GPU|built without)[^"\n]*')
FAILURE = re.compile(r"Failure|CUDA error|illegal|terminate")
TEST_FILES = "kernels/kernel_table_test.cpp;kernels/cuda_kernels_test.cpp"


def test_filter(group):
    """The gtest filter of a kernel's tests; our grouped GEMM's tests are the MoE experts
    table's kernel."""
    ours = "GroupedGemm" if group == "MoeExperts" else group
    return f"Tables/KernelTableOnCuda.EveryPathMatchesTheExplicitOne/{group}:CudaKernels.{ours}*"


def test_rows(group, rc, log_text):
    """(the table's rows, the verdict) of one kernel's test process: a row a case that says
    its figure, then the kernel's row: skipped (every test skipped, with the reason), ok, or
    FAIL with its first failure line."""
    lines = log_text.splitlines()
    cases = [f"kernel test: {line}" for line in lines if CASE.search(line)]
    passed = any(re.match(r"\[  PASSED  \] [1-9]", line) for line in lines)
    if any(line.startswith("[  SKIPPED ]") for line in lines) and not passed:
        reason = SKIP_REASON.search(log_text)
        why = logfiles.cut(reason.group(0), 80) if reason else ""
        return cases + [f"kernel test: {group}: skipped: {why}"], "skipped"
    if rc == 0:
        return cases + [f"kernel test: {group}: {len(cases)} cases, each within its bar: ok"], "ok"
    failure = next((line for line in lines if FAILURE.search(line)), "")
    return cases + [f"kernel test: {group}: FAIL: exit {rc} (logs/kernel_test_{group}.log): "
                    f"{logfiles.cut(failure, 160)}"], "FAIL"


def build_test_binaries(check):
    """On the GPU machine: the test binary from the two kernel test files alone, and
    vescale-kernel-speed, in build-cuda; whether it built (a FAIL row if not)."""
    started = check.clock.seconds()
    seconds = check.clock.limit(240)
    log = check.log("kernel_test_build.log")
    steps = (["cmake", "-S", ".", "-B", "build-cuda", "-DVESCALE_BUILD_TESTS=ON",
              "-DVESCALE_BUILD_BENCH=ON", f"-DVESCALE_TEST_FILES={TEST_FILES}"],
             ["cmake", "--build", "build-cuda", "--target", "vescale_tests",
              "vescale-kernel-speed", "-j", machine.cores()])
    rc = 0
    for argv in steps:  # one time limit for both, as `cmake ... && cmake --build ...` had
        left = max(1, seconds - (check.clock.seconds() - started))
        rc = runs.run_limited(argv, left, log, append=argv is not steps[0])
        if rc != 0:
            break
    check.say(f"kernel test build: exit {rc} in {check.clock.seconds() - started} s")
    if rc != 0:
        check.report.add("kernel_tests", f"kernel test: FAIL: building the test binary: exit {rc}: "
                         f"{logfiles.last_line(log)}", "FAIL")
    return rc == 0


def kernel_speed(check, speed):
    """vescale-kernel-speed's table (on --cpu: the fallbacks at small shapes)."""
    if not executable(speed):
        check.report.add("kernel_tests", f"kernel speed: skipped: no binary at {speed}", "skipped")
        return
    if not check.clock.may_start("kernel speed"):
        check.report.add("kernel_tests", "kernel speed: skipped: past the deadline "
                         f"({check.clock.deadline} s)", "skipped")
        return
    args = ["--device", "cuda"] if check.mode == "gpu" else ["--device", "cpu", "--small"]
    log = check.log("kernel_speed.log")
    rc = runs.run_limited([speed, *args], check.clock.limit(120), log)
    if rc == 0:
        rows = [line for line in logfiles.lines(log) if line.startswith("|")]
        check.report.kernel_tests += ["", f"kernel speed ({speed} {' '.join(args)}): our rows "
                                      "against the rows that run in their place", "", *rows]
        check.report.tally("ok")
    else:
        check.report.add("kernel_tests", f"kernel speed: FAIL: exit {rc} (logs/kernel_speed.log): "
                         f"{logfiles.cut(logfiles.last_line(log), 160)}", "FAIL")
    check.say(f"kernel speed: exit {rc}")


def run(check):
    # --cpu: the build folder of the binary the other stages ran.
    build = "build-cuda" if check.mode == "gpu" else os.path.dirname(check.binary)
    if check.mode == "gpu" and os.path.isdir(build) and not build_test_binaries(check):
        return
    tests = os.path.join(build, "tests/vescale_tests")
    if not executable(tests):
        check.report.add("kernel_tests", f"kernel test: skipped: no test binary at {tests}",
                         "skipped")
        return
    for group in GROUPS:
        if not check.clock.may_start(f"kernel test {group}"):
            check.report.add("kernel_tests", f"kernel test: {group}: skipped: past the deadline "
                             f"({check.clock.deadline} s)", "skipped")
            continue
        log = check.log(f"kernel_test_{group}.log")
        rc = runs.run_limited([tests, f"--gtest_filter={test_filter(group)}"],
                              check.clock.limit(90), log,
                              env=dict(os.environ, CUDA_LAUNCH_BLOCKING="1"))
        rows, verdict = test_rows(group, rc, logfiles.read(log))
        check.report.kernel_tests += rows
        check.report.tally(verdict)
        check.say(f"kernel test {group}: exit {rc}, {len(rows) - 1} cases")
    kernel_speed(check, os.path.join(build, "vescale-kernel-speed"))
