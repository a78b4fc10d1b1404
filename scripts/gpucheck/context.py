"""One call's state, shared by the stages: what runs where, the clock, the table so far, and
what each run left behind (its exit status, its time, whether its parity rows passed)."""
import os
from dataclasses import dataclass, field

from gpucheck.clock import Clock
from gpucheck.table import Report


@dataclass(frozen=True)
class Device:
    """What a mode runs on: the parity rows' device side and the bench's step counts."""
    name: str  # --training.device of the device side
    side: str  # how the rows name the device side
    warmup: int  # the first steps the medians leave out (CUDA: allocator, cuBLAS, compile)
    bench_steps: int
    profile_steps: int


DEVICES = {"gpu": Device("cuda", "cuda", 10, 40, 4), "cpu": Device("cpu", "cuda*", 1, 6, 4)}


@dataclass
class Check:
    mode: str  # "gpu" or "cpu"
    binary: str  # vescale-train
    logs: str  # DIR/logs: each run's output, metrics.jsonl and config
    scratch: str  # the runs' dump folders (checkpoints, traces), removed at the end
    clock: Clock
    report: Report
    torch_python: str = ""  # the first python3 that imports torch, for the peers; "" if none
    gpu_name: str = ""  # nvidia-smi's name of GPU 0; "" under --cpu
    build_failed: bool = False
    run_failed: dict = field(default_factory=dict)  # run name -> its exit status, if not 0
    run_seconds: dict = field(default_factory=dict)  # run name -> its wall time, whole seconds
    verified_runs: list = field(default_factory=list)  # runs whose parity rows passed

    @property
    def device(self):
        return DEVICES[self.mode]

    def log(self, name):
        """The path of `name` in the logs folder."""
        return os.path.join(self.logs, name)

    def say(self, text):
        self.clock.say(text)
