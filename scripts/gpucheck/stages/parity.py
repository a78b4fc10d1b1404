"""parity: a small GPT (dropout 0.1), Llama and Mixtral for 20 steps on the device (one rank)
against the CPU in float64, float32 and bf16, some with every CUDA kernel row taken; dp 2 over
Gloo; the device's checkpoint resumed on the CPU, evaluated and generated from; then the kernel
rows the passing device runs took (NOTE [GPU-verified])."""
import os
import subprocess

from gpucheck import configs, figures, kernel_rows, logfiles, machine, runs, table

F64, F32, BF16 = "--training.dtype=float64", "--training.dtype=float32", "--training.dtype=bfloat16"
UNVERIFIED = "--training.unverified_kernels=true"
PROMPT = ("--prompt-ids", "1,2,3", "--max-new-tokens", "16", "--greedy")


def parity_row(check, name, bar, figure, computed):
    """A parity row: ok when the figure was computed and is within `bar`; returns the verdict."""
    verdict = "ok" if computed and table.within_bar(figure, bar) else "FAIL"
    check.report.add("parity", table.cells(name, figure, bar, verdict), verdict)
    check.say(f"parity: {name}: {figure} (bar {bar}): {verdict}")
    return verdict


def compare(check, name, bar, ref, run, first=1, count=20):
    """A parity row from two runs' metrics (both must have run): the largest relative difference
    of their losses over `count` steps from `first`."""
    figure, computed = figures.or_reason(figures.max_relative, check.log(f"{ref}.jsonl"),
                                         check.log(f"{run}.jsonl"), first, count)
    for side in (ref, run):
        if side in check.run_failed:
            figure, computed = runs.why_failed(check, side), False
    if parity_row(check, name, bar, figure, computed) == "ok":
        check.verified_runs.append(run)


def single_rank_rows(check, small, llama, mixtral):
    """Each family on the device side against the CPU, with the kernel rows it takes."""
    dev, side = f"--training.device={check.device.name}", check.device.side
    cpu = "--training.device=cpu"
    train = lambda name, config, *args: runs.train(check, name, 120, config, *args)
    train("cpu64", small, cpu, F64)
    train("dev64", small, dev, F64, "--checkpoint.interval=10", "--checkpoint.keep=0")
    compare(check, f"gpt float64, {side} vs cpu (loss, val_loss, 20 steps)", "1e-10", "cpu64",
            "dev64")
    train("cpu32", small, cpu, F32)
    train("dev32", small, dev, F32)
    compare(check, f"gpt float32, {side} vs cpu", "1e-4", "cpu32", "dev32")
    train("devbf16", small, dev, BF16)
    compare(check, f"gpt bf16 on {side} vs float32 on cpu", "2e-2", "cpu32", "devbf16")
    # Every CUDA kernel row, those no GPU has run too (NOTE [GPU-verified]).
    unverified = "unverified kernel rows taken, vs"
    train("devbf16_unverified", small, dev, BF16, UNVERIFIED)
    compare(check, f"gpt bf16 on {side}, {unverified} float32 on cpu", "2e-2", "cpu32",
            "devbf16_unverified")
    train("dev32_unverified", small, dev, F32, UNVERIFIED)
    compare(check, f"gpt float32 on {side}, {unverified} cpu", "1e-4", "cpu32", "dev32_unverified")
    train("llama_cpu64", llama, cpu, F64)
    train("llama_dev64", llama, dev, F64)
    compare(check, f"llama float64, {side} vs cpu", "1e-10", "llama_cpu64", "llama_dev64")
    train("llama_cpu32", llama, cpu, F32)
    train("llama_devbf16", llama, dev, BF16)
    compare(check, f"llama bf16 on {side} vs float32 on cpu", "2e-2", "llama_cpu32",
            "llama_devbf16")
    # With every CUDA row, our SwiGLU kernel (NOTE [CUDA kernels]) among them.
    train("llama_devbf16_unverified", llama, dev, BF16, UNVERIFIED)
    compare(check, f"llama bf16 on {side}, {unverified} float32 on cpu", "2e-2", "llama_cpu32",
            "llama_devbf16_unverified")
    train("mixtral_cpu32", mixtral, cpu, F32)
    train("mixtral_devbf16", mixtral, dev, BF16)
    compare(check, f"mixtral bf16 on {side} vs float32 on cpu", "2e-2", "mixtral_cpu32",
            "mixtral_devbf16")
    # With every CUDA row, our grouped GEMM for the experts (NOTE [Grouped experts]) among them.
    train("mixtral_devbf16_unverified", mixtral, dev, BF16, UNVERIFIED)
    compare(check, f"mixtral bf16 on {side}, {unverified} float32 on cpu", "2e-2",
            "mixtral_cpu32", "mixtral_devbf16_unverified")
    train("mixtral_dev32_unverified", mixtral, dev, F32, UNVERIFIED)
    compare(check, f"mixtral float32 on {side}, {unverified} cpu", "1e-4", "mixtral_cpu32",
            "mixtral_dev32_unverified")


def checkpoint_rows(check, small):
    """Several ranks over Gloo, and the device run's step-10 checkpoint resumed, evaluated and
    generated from."""
    side, cpu = check.device.side, "--training.device=cpu"
    # The wheel ships Gloo inside libtorch_cpu and no headers (NOTE [Gloo headers] in
    # scripts/fetch-cuda-deps.sh): dp 2 on 2 CPU processes gives the 1-process losses.
    runs.train(check, "gloo_dp2", 120, small, cpu, F64, "--parallel.dp=2", "--nproc", "2")
    compare(check, "gloo: gpt float64, dp 2 on 2 processes vs 1 process", "1e-10", "cpu64",
            "gloo_dp2")
    # The device run's step-10 checkpoint, resumed on the CPU, must continue as the CPU run did.
    ckpt = os.path.join(check.scratch, "dev64/checkpoints/step-000010")
    runs.train(check, "resume_cpu64", 120, small, cpu, F64, f"--checkpoint.load={ckpt}")
    compare(check, f"resume: gpt float64 {side} step-10 checkpoint on cpu, steps 11-20 vs cpu",
            "1e-10", "cpu64", "resume_cpu64", 11, 10)
    eval_row(check, small, ckpt)
    generate_row(check, small, ckpt)


def from_checkpoint(check, command, config, folder, *args):
    """`vescale-train COMMAND CONFIG` from a checkpoint with its own dump folder."""
    dump = os.path.join(check.scratch, folder)
    return [check.binary, command, config, f"--job.dump_folder={dump}", *args]


def eval_row(check, small, ckpt):
    """eval of the checkpoint on the device gives the run's own val_loss at step 10."""
    on_dev = (f"--training.device={check.device.name}", F64, "--checkpoint", ckpt)
    rc = runs.run_limited(from_checkpoint(check, "eval", small, "eval", *on_dev),
                          check.clock.limit(60), check.log("eval.log"))
    figure, computed = figures.or_reason(figures.val_loss_relative, check.log("dev64.jsonl"), 10,
                                         logfiles.read(check.log("eval.log")))
    if rc != 0:
        figure, computed = f"eval exit {rc}", False
    parity_row(check, f"eval on {check.device.side} of that checkpoint vs the run's val_loss at "
               "step 10", "1e-10", figure, computed)


def generate_row(check, small, ckpt):
    """Greedy generation from the checkpoint: the same 16 tokens on the device and the CPU."""
    rcs = {}
    for where, device in (("dev", check.device.name), ("cpu", "cpu")):
        argv = from_checkpoint(check, "generate", small, "gen", f"--training.device={device}", F64,
                               "--checkpoint", ckpt, *PROMPT)
        rcs[where] = runs.run_limited(argv, check.clock.limit(60),
                                      check.log(f"generate_{where}.out"),
                                      errors=check.log(f"generate_{where}.log"))
    figure, computed = figures.or_reason(figures.token_differences,
                                         logfiles.read(check.log("generate_dev.out")),
                                         logfiles.read(check.log("generate_cpu.out")))
    if rcs["dev"] != 0 or rcs["cpu"] != 0:
        figure = f"generate exit {rcs['dev']} ({check.device.side}), {rcs['cpu']} (cpu)"
        computed = False
    parity_row(check, "greedy generate of 16 tokens from it, "
               f"{check.device.side} vs cpu: tokens that differ", "0", figure, computed)


def kernel_lines(check):
    """The table's kernel lines from the passing device-side runs' logs and the binary's rows."""
    took = kernel_rows.taken(logfiles.read(check.log(f"{run}.log")) for run in check.verified_runs
                             if kernel_rows.is_device_side(run))
    version = subprocess.run([check.binary, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    gpu_facts = (machine.today(), check.gpu_name) if check.mode == "gpu" else ()
    for line in kernel_rows.lines(check.mode, took, kernel_rows.cuda_rows(version), *gpu_facts):
        check.report.add("kernels", line)


def run(check):
    paths = configs.write_parity_configs(check.logs)
    single_rank_rows(check, paths["gpt"], paths["llama"], paths["mixtral"])
    checkpoint_rows(check, paths["gpt"])
    kernel_lines(check)
