"""ranks: several ranks sharing the one GPU over Gloo with CUDA tensors (NOTE [Ranks sharing a
GPU], NOTE [Gloo with CUDA tensors]), float64, each layout's 10 steps against the CPU's 1-process
run (1e-10); the dp2 x tp2 run's sharded step-5 checkpoint resumed on the CPU; bf16 dp2 x tp2
against float32 on the CPU (2e-2). Skipped on --cpu unless RANKS_ON_CPU is set."""
import os

from gpucheck import configs, runs
from gpucheck.stages.parity import F64, compare

# Ranks sharing a GPU take Gloo with CUDA tensors, GPU code until a run verifies it (NOTE
# [GPU-verified]): opted in, as the unverified kernel rows are.
TEN = ("--training.steps=10", "--eval.interval=5", "--training.unverified_kernels=true")
SP = "--parallel.plan=gpt/megatron-sp"
CPU = "--training.device=cpu"
# Each layout: (run name, family, reference run, ranks, its arguments).
LAYOUTS = (
    ("ranks_dp2tp2_sp", "gpt", "ranks_cpu64", 4,
     ("--parallel.dp=2", "--parallel.tp=2", SP, "--checkpoint.interval=5", "--checkpoint.keep=0")),
    ("ranks_pp2dp2_1f1b", "gpt", "ranks_cpu64", 4,
     ("--parallel.pp=2", "--parallel.dp=2", "--parallel.microbatches=2",
      "--parallel.pp_schedule=1f1b")),
    ("ranks_dp2_zero3", "gpt", "ranks_cpu64", 2, ("--parallel.dp=2", "--parallel.zero=3")),
    ("ranks_cp2tp2", "gpt", "ranks_cpu64", 4, ("--parallel.cp=2", "--parallel.tp=2", SP)),
    ("ranks_mixtral_ep2dp2", "mixtral", "ranks_mixtral_cpu64", 2,
     ("--parallel.dp=2", "--parallel.ep=2")),
    ("ranks_llama_tp2", "llama", "ranks_llama_cpu64", 2,
     ("--parallel.tp=2", "--parallel.plan=llama/megatron-tp")),
)


def took(check, name):
    return check.run_seconds.get(name, "?")


def run(check):
    side = check.device.side
    if check.mode == "cpu" and not os.environ.get("RANKS_ON_CPU"):
        check.report.add("stages", "ranks: skipped: --cpu (ranks sharing a GPU need one; the CPU's "
                         "tests run these layouts over Gloo)", "skipped")
        check.say("skipped ranks: --cpu")
        return
    paths = configs.write_parity_configs(check.logs)
    small = paths["gpt"]
    runs.train(check, "ranks_cpu64", 120, small, CPU, F64, *TEN)
    runs.train(check, "ranks_cpu32", 120, small, CPU, "--training.dtype=float32", *TEN)
    runs.train(check, "ranks_llama_cpu64", 120, paths["llama"], CPU, F64, *TEN)
    runs.train(check, "ranks_mixtral_cpu64", 120, paths["mixtral"], CPU, F64, *TEN)
    dev = f"--training.device={check.device.name}"
    for name, family, ref, nproc, args in LAYOUTS:
        runs.train(check, name, 180, paths[family], dev, F64, *TEN, "--nproc", str(nproc), *args)
        compare(check, f"ranks: {name}, {nproc} ranks on {side} over Gloo, float64 vs cpu 1 "
                f"process ({took(check, name)} s)", "1e-10", ref, name, 1, 10)
    # The dp2 x tp2 run's sharded step-5 checkpoint, on the CPU at 1 process: steps 6-10 as the
    # CPU's.
    ckpt = os.path.join(check.scratch, "ranks_dp2tp2_sp/checkpoints/step-000005")
    runs.train(check, "ranks_resume_cpu64", 120, small, CPU, F64, *TEN, f"--checkpoint.load={ckpt}")
    compare(check, f"ranks: the dp2 x tp2 run's {side} step-5 checkpoint resumed on cpu at 1 "
            f"process, steps 6-10 vs cpu ({took(check, 'ranks_resume_cpu64')} s)", "1e-10",
            "ranks_cpu64", "ranks_resume_cpu64", 6, 5)
    runs.train(check, "ranks_dp2tp2_bf16", 180, small, dev, "--training.dtype=bfloat16", *TEN,
               "--nproc", "4", "--parallel.dp=2", "--parallel.tp=2", SP)
    compare(check, f"ranks: dp2 x tp2 bf16, 4 ranks on {side} over Gloo, vs float32 on cpu "
            f"({took(check, 'ranks_dp2tp2_bf16')} s)", "2e-2", "ranks_cpu32", "ranks_dp2tp2_bf16",
            1, 10)
