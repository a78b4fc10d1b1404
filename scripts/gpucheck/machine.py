"""Facts about this machine for the table's header: the CPU, the GPUs, the Python that imports
torch (the peers run under it), the binary's version, the date."""
import datetime
import subprocess

from gpucheck import logfiles

TORCH_PROBE = ('import sys, torch\n'
               'print(torch.__version__, "CUDA", torch.version.cuda, "python", '
               'sys.version.split()[0])')


def output(argv, timeout=60):
    """argv's stdout without its trailing newlines, or None when it fails or cannot start."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.rstrip("\n") if done.returncode == 0 else None


def has_gpu():
    return output(["nvidia-smi", "-L"]) is not None


def gpu_name():
    """nvidia-smi's name of the first GPU."""
    names = output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]) or ""
    return names.split("\n")[0]


def cores():
    """`nproc`: the cores this process may use (OMP_NUM_THREADS has its say, as for nproc)."""
    return output(["nproc"]) or "?"


def cpu_model():
    """/proc/cpuinfo's first model name."""
    line = logfiles.first_match("/proc/cpuinfo", r"model name") or ""
    return line.split(":")[1].lstrip(" ") if ":" in line else ""


def machine_line(mode):
    if mode == "gpu":
        gpus = (output(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                        "--format=csv,noheader"]) or "").split("\n")
        return f"machine: {len(gpus)} x {gpus[0]}; {cpu_model()}, {cores()} cores"
    return f"machine: {cpu_model()}, {cores()} cores (--cpu: no GPU used)"


def torch_python(candidates):
    """(the first of `candidates` that imports torch, its versions line), or ("", "")."""
    for candidate in candidates:
        versions = output([candidate, "-c", TORCH_PROBE])
        if versions is not None:
            return candidate, versions
    return "", ""


def torch_line(python, versions):
    if python:
        return f"torch: {versions} ({python})"
    return "torch: none (no python3 here imports torch; PYTHON names one)"


def binary_line(binary):
    """The header's vescale-train line: the first two lines of its --version."""
    try:
        said = subprocess.run([binary, "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired) as e:
        said = [str(e)]
    return "vescale-train: " + logfiles.cut(" ".join(said[:2]), 300)


def today():
    """The date in UTC, YYYY-MM-DD."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def title_line():
    return datetime.datetime.now(datetime.timezone.utc).strftime("gpu-check %Y-%m-%d %H:%M UTC")
