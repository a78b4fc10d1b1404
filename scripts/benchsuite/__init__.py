"""Benchmarks, each printing a table (scripts/bench.sh runs this package; `--help` prints this).
  0. peers: the same GPT (configs/gpt-tiny.toml at seq_len = block_size = 128, global batch 16,
     $PEER_STEPS steps) in today's PyTorch (python/requirements.txt's wheel, 2.11, through
     bench/peers/gpt_torch.py): eager and torch.compile on 1 process, DDP, FSDP2 (fully_shard)
     and DTensor tensor parallelism (Megatron colwise/rowwise + sequence parallel) on 2; against
     vescale-train on Debian's LibTorch 1.13 (OpenBLAS) and on the wheel's LibTorch 2.11 (MKL)
     at 1 process, dp=2, dp=2 ZeRO-3 and tp=2; float32, and bf16 (1 process) where the CPU has
     AVX512-BF16 or AMX; and a plain LibTorch loop (vescale-bench-plain: no DTensor, no hooks).
     Tokens/s after the first step and the peak resident memory of the process tree (the
     largest process), median (min-max) of $PEER_ROUNDS rounds that run every row once, in turn;
     vescale's ratios to the matching peer as the median of the per-round ratios (rows of one
     round share the machine's state), every row's runs listed under the table. Peers run with
     their fastest thread settings (the candidates in $PEER_1_ENVS and $PEER_2_ENVS; the peer
     rows of 2022's Debian PyTorch 1.13 are BENCH=peer-threads'), vescale-train with its own
     defaults (no thread variables set);
  1. collectives over every mesh dim (comm bench) on 2 and 4 local processes;
  2. training throughput of configs/gpt-tiny.toml (float32, 60 steps) on 1 process and on the
     config's dp=2 x tp=2 mesh;
  3. pipeline schedules: gpt-tiny at pp=2 (30 steps) for each schedule and 4, 8, 16
     micro-batches: tokens/s, the bubble each rank measured (time waiting for the other stage
     over step time) next to the schedule's simulated/analytic bubble, and each rank's peak
     resident memory and peak micro-batches in flight;
  4. ZeRO: gpt-tiny at dp=2 and dp=4 (tp=1) for parallel.zero = 0, 1, 2, 3 (30 steps): tokens/s,
     rank 0's parameters / gradients / optimizer state after a step (from tensor sizes), its
     peak resident memory, and the dp bytes per step by kind;
  5. checkpoints: a GPT of about 300 MB of state (n_embd 512, 8 blocks, AdamW) on tp=2, saved
     sharded and merged, sync and async: the training stall per checkpoint (time the training
     thread spent in the save), the write throughput (the step folder's bytes over the time from
     the first file opened to COMMIT, files fsynced), `dd conv=fsync` of as many bytes into the
     same folder, their ratio, and rank 0's peak resident memory.
  6. export: a 125M-parameter Llama checkpoint exported as a Hugging Face folder in float32 and
     bfloat16: bytes, seconds, MB/s and the exporter's peak resident memory.
  7. recompute: activation checkpointing none / selective / full on 1 process for gpt-tiny and
     a GPT of 8 blocks, C = 256, T = 512: the activation bytes metrics report, the median step
     time, each against none, and the peak resident memory.
  8. cp: context parallelism at T = 1024 (gpt-tiny's model, 2 sequences a step) on cp = 1, 2
     and 4 processes: tokens/s, rank 0's activation bytes against cp = 1, the bytes it sent
     over cp in a step against the ring formula plan lint states, and its peak resident memory.
  9. generate: 256 new tokens (greedy, 1 process) from gpt-tiny trained 200 steps and from a GPT
     of 8 blocks, C = 256, block_size 512 (one step trained: its speed, not its text), with and
     without the KV cache: tokens/s, the mean time of a step in the first and the last quarter
     of the steps, the time to the first token, and the context restarts.
 10. flight: what the flight recorder costs (NOTE [Flight recorder]): ns a call
     (vescale-bench-flight), the calls of a step on each rank of gpt-dp2-tp2 and pp 2 x tp 2
     (from their dumps after step 20), their share of the step time, and tokens/s with the
     recorder on (4096 entries) and off (0), 3 alternating rounds each.
 11. fused: gpt-tiny's model at T = 128 on 1 process at vocabularies 256 and 50,304 with the
     fused LM loss and the fused projections each on and off: tokens/s (3 alternating rounds),
     the activation bytes metrics report, peak resident memory.
 12. moe: configs/mixtral-tiny.toml with 8 experts, top-2, against the dense Llama of the same
     active parameters (configs/llama-tiny.toml's SwiGLU of 2 x 172, tp = 1), 40 steps, on 1
     process, dp = 2 and (MoE) dp = 2 with ep = 2: tokens/s (median after the first step),
     rank 0's parameter bytes, the bytes it sent over ep and dp in a step, peak resident memory.
 13. optimizer: the optimizer phase of GPT-2 124M (configs/gpt2-124m.toml at 1 x 32 tokens a
     step, so that the phase is a large part of the step) in float32 and bf16 on 1 process: the
     median of steps 3-6 of its `opt` time (NOTE [Step anatomy]), of the step, and the state
     bytes; OLD_TRAIN=<binary> adds that binary's rows, alternating with this one's, twice each.
 14. muon: Muon against AdamW (NOTE [Muon]) on configs/gpt-tiny.toml's model at n_embd =
     MUON_WIDTHS (128 256) and fortunes, 1 process, float32, MUON_STEPS (500) steps of 16 x 64
     tokens: each at lr 1e-3, 3e-3, 1e-2 with seed 1 (and the next rate past the sweep's edge
     while the best is there), then seeds 2 and 3 at each one's best lr; the final val_loss,
     the tokens each seed needs to reach AdamW's mean final val_loss, and a plot (docs/muon.png
     with matplotlib).
 15. muon-cost: the step of Muon against AdamW's on the same models, 60 steps, 3 alternating
     rounds: the median `opt` phase and step time, tokens/s.
 16. jsonl: data prepare of ~550 MB of JSON lines, plain, gzip and zstd, on 1 and 2 threads,
     with a 2,000-token byte-level BPE (and bytes once): seconds, MB/s of JSON, peak RSS; the
     outputs compared byte for byte.
 17. lora: LoRA against a full fine-tune from the same base, on llama-tiny (the walk-through's
     SFT data, 200 steps) and TinyLlama's 1.1B shape (4 steps): grads and optimizer bytes,
     tokens/s, peak RSS, val_loss.
Usage: scripts/bench.sh [--sizes 1K,1M,16M]; BENCH=zero (or peers, comm, train, pipeline,
checkpoint, export, recompute, cp, generate, flight, fused, moe, peer-threads, prepare,
optimizer, muon, muon-cost, jsonl, lora; a comma list) runs only those tables. BENCH=prepare (data prepare of
a 537 MB corpus, ~16 minutes here), BENCH=optimizer (~4 minutes), BENCH=muon (~22 runs of 1 to 3
minutes), BENCH=muon-cost (~3 minutes), BENCH=jsonl (~7 minutes) and BENCH=lora (~10 minutes,
18 GiB of memory) are not in the default set.

Environment: VESCALE_TRAIN, VESCALE_BENCH_PLAIN, VESCALE_BENCH_FLIGHT and VESCALE_TRAIN_WHEEL name
the binaries (default: $BUILD_DIR, or build/, and build-wheel/vescale-train); PEER_ROUNDS (3),
PEER_STEPS (40), PEER_1_ENVS, PEER_2_ENVS, PEER_PY1_ENVS, PEER_PLAIN_ENVS and PEER_PY_ARGS tune the
peers tables; OLD_TRAIN the optimizer table; MUON_WIDTHS, MUON_STEPS and MUON_PNG the muon tables.
Arguments (default --sizes 1K,64K,1M,16M) go to `vescale-train comm bench`.
"""
