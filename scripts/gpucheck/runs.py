"""Running vescale-train, the Python peer and the other tools with time limits, their output in
the logs folder, as coreutils' `timeout -k 10` ran them."""
import contextlib
import os
import shutil
import signal
import subprocess

from gpucheck import logfiles

KILL_AFTER = 10  # seconds from SIGTERM to SIGKILL for a run past its limit
TIMED_OUT = (124, 137)  # `timeout`'s exit status for a run it stopped, and one it had to kill


def exit_status(returncode):
    """A Popen return code as the shell reports it: 128 + N for a run killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_limited(argv, seconds, log, errors=None, env=None, append=False):
    """Runs argv with its output in file `log` (appended to it if `append`; its stderr in
    `errors` if given), in a process group of its own; past `seconds` the group gets SIGTERM,
    and SIGKILL 10 s later. Returns the exit status: 124 when it was stopped, 137 when it had to
    be killed."""
    with open(log, "a" if append else "w") as out, open(errors or os.devnull, "w") as err:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err if errors else subprocess.STDOUT,
                                    env=env, process_group=0)
        except OSError as e:
            print(f"{argv[0]}: {e.strerror}", file=out)
            return 127
        try:
            return exit_status(proc.wait(timeout=seconds))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_AFTER)
                return TIMED_OUT[0]
            except subprocess.TimeoutExpired:
                return TIMED_OUT[1]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextlib.contextmanager
def gpu_memory_sampled(check, name):
    """GPU memory in use, sampled every 100 ms into logs/NAME.smi while the block runs (the
    process's own figure where the allocator's statistics do not reach: CUDA context, cuBLAS
    workspaces, other allocators); nothing on the CPU."""
    if check.mode != "gpu":
        yield
        return
    with open(check.log(f"{name}.smi"), "w") as out:
        sampler = subprocess.Popen(["nvidia-smi", "--id=0", "--query-gpu=memory.used",
                                    "--format=csv,noheader,nounits", "-lms", "100"],
                                   stdout=out, stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            sampler.terminate()
            sampler.wait()


def smi_max(check, name):
    """The most MiB in use during run `name`, as text ("-" on the CPU)."""
    used = [int(line) for line in map(str.strip, logfiles.lines(check.log(f"{name}.smi")))
            if line.isdigit()]
    return str(max(used)) if used else "-"


def train(check, name, seconds, config, *args):
    """`vescale-train train CONFIG ARGS` as run `name`, into its own dump folder, its output and
    metrics.jsonl kept in the logs; returns its exit status (recorded in check.run_failed when
    not 0)."""
    dump = os.path.join(check.scratch, name)
    shutil.rmtree(dump, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):  # never an earlier call's figures
        os.remove(check.log(f"{name}.jsonl"))
    started = check.clock.seconds()
    with gpu_memory_sampled(check, name):
        rc = run_limited([check.binary, "train", config, f"--job.dump_folder={dump}", *args],
                         check.clock.limit(seconds), check.log(f"{name}.log"))
    with contextlib.suppress(OSError):
        shutil.copyfile(os.path.join(dump, "metrics.jsonl"), check.log(f"{name}.jsonl"))
    check.run_seconds[name] = check.clock.seconds() - started
    check.say(f"{name}: exit {rc} in {check.run_seconds[name]} s")
    if rc != 0:
        logfiles.indented(logfiles.tail(check.log(f"{name}.log"), 3))
        check.run_failed[name] = rc
    return rc


def peer(check, name, config, *args):
    """bench/peers/gpt_torch.py CONFIG --json ARGS as run `name` (its figures are its log's last
    line); returns its exit status."""
    started = check.clock.seconds()
    with gpu_memory_sampled(check, name):
        rc = run_limited([check.torch_python, "bench/peers/gpt_torch.py", config, "--device",
                          check.device.name, "--json", "--warmup", str(check.device.warmup),
                          *args], check.clock.limit(240), check.log(f"{name}.log"))
    check.say(f"{name}: exit {rc} in {check.clock.seconds() - started} s")
    return rc


def why_failed(check, name):
    """One line on why run `name` failed: its exit status and its first error line (or its last
    line), short enough for a table cell."""
    rc = check.run_failed.get(name, "?")
    if rc in TIMED_OUT:
        return f"{name} timed out (exit {rc}: its limit, or the call's END, came first)"
    log = check.log(f"{name}.log")
    line = logfiles.first_match(log, r"(^|\] )(error|Error|terminate)") or logfiles.last_line(log)
    line = logfiles.cut(line.replace("\r", "").replace("|", "/"), 160)
    return f"{name} exited {rc}: {line or 'no output'}"
