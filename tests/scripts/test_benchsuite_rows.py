"""Each table's rows from given figures, compared with the rows docs/benchmarks.md shows (the
docs write `–` and `×` where the tables print `-` and `x`) or, for the column-aligned tables,
with the printed text."""
import unittest

import benchsuite_path  # noqa: F401
from benchsuite import markdown
from benchsuite.tables import (checkpoint, cp, export, flight, fused, generate, jsonl, lora, moe,
                               optimizer, pipeline, prepare, recompute, train, zero)

MIB = 2**20


def steps(key, values, **last):
    """Metrics lines with key at each value (the first step's left out by the tables), the last
    line's other fields from last."""
    lines = [{key: v} for v in values]
    lines[-1].update(last)
    return lines


class Markdown(unittest.TestCase):
    def test_header_and_row(self):
        self.assertEqual(markdown.header("a", "b"), "| a | b |\n| --- | --- |")
        self.assertEqual(markdown.row(1, "x y"), "| 1 | x y |")
        self.assertEqual(markdown.mib(3.5 * MIB), "3.50 MiB")
        self.assertEqual(markdown.mib(3.5 * MIB, 1), "3.5 MiB")


class MarkdownRows(unittest.TestCase):
    def test_moe(self):
        lines = steps("tokens_per_s", [1.0, 18400, 18433, 18500],
                      state_bytes={"params": 3166728}, comm_bytes={"dp": 3166728})
        self.assertEqual(moe.row("dense llama (SwiGLU 344)", "dp 2", lines, "229.0MiB"),
                         "| dense llama (SwiGLU 344) | dp 2 | 18,433 | 3.02 MiB | 0 | 3,166,728 | 229.0MiB |")

    def test_recompute(self):
        act, ms = recompute.figures(steps("step_time_s", [1.0, 0.0923, 0.0924, 0.0925],
                                          state_bytes={"activations": 38.59 * MIB}))
        self.assertAlmostEqual(ms, 92.4)
        self.assertEqual(recompute.row("gpt-tiny", "selective", act, ms, 41.59 * MIB, 90.6, "246.8MiB"),
                         "| gpt-tiny | selective | 38.59 MiB | 0.93 | 92 | 1.02 | 246.8MiB |")

    def test_cp(self):
        lines = steps("tokens_per_s", [10.0, 6543, 6500, 6600],
                      state_bytes={"activations": 36.15 * MIB},
                      comm_bytes_by_kind={"cp": {"send": 12582912}})
        self.assertEqual(cp.row(2, lines, "12582912", 140.18 * MIB, "253.1MiB"),
                         "| 2 | 6543 | 36.15 MiB | 0.26 | 12582912 | 12582912 | 253.1MiB |")

    def test_export(self):
        line = ("exported /o/export/checkpoints/latest (step 1) as LlamaForCausalLM to /o/hf: 111 "
                "tensors, 475.6MiB in 1 safetensors file, 2.0s (251 MB/s), peak RSS 590.1MiB")
        self.assertEqual(export.row("float32", line),
                         "| float32 | 111 | 475.6MiB | 2.0s | 251 | 590.1MiB |")
        self.assertEqual(export.row("float32", "error: no checkpoint"), "error: no checkpoint")

    def test_generate(self):
        line = ("[12:00:00] info [generate] 1 prompt tokens, 256 new tokens in each of 1 sample(s), "
                "0.17 s: 1573.5 tokens/s after the first; time to first token 0.002 s; 0.57 ms a "
                "step in the first quarter, 0.65 ms in the last; KV cache on (0.1 MiB on rank 0), "
                "6 context restarts")
        self.assertEqual(generate.row("gpt-tiny", "on", line),
                         "| gpt-tiny | on | 1573.5 | 0.57 | 0.65 | 0.002 | 6 |")

    def test_flight(self):
        self.assertEqual(
            flight.row("dp 2 x tp 2 megatron-tp", "65.0", [17, 17, 17, 17], [0.0362, 0.0361, 0.0363],
                       [6495, 6400, 6500], [6567, 6600, 6500]),
            "| dp 2 x tp 2 megatron-tp | 17, 17, 17, 17 | 1.1 us | 36.2 ms | 0.003% | 6,495 | 6,567 | -1.1% |")

    def test_fused(self):
        step = 16 * 128
        figures = {
            ("true", "true"): ([step / 0.1141, step / 0.1467, step / 0.1130], 77.0 * MIB, "295.8MiB"),
            ("true", "false"): ([18808, 17169, 18875], 76.3 * MIB, "300.8MiB"),
            ("false", "true"): ([18736, 17485, 19183], 78.9 * MIB, "298.8MiB"),
            ("false", "false"): ([18451, 17694, 18748], 78.2 * MIB, "308.2MiB"),
        }
        rows = list(fused.rows(256, figures))
        self.assertEqual(rows[1], "| 256 | true | false | 18,808 | 17,169-18,875 | 1.02x | 76.3 MiB | 0.98 | 300.8MiB |")
        self.assertEqual(rows[3], "| 256 | false | false | 18,451 | 17,694-18,748 | 1.00x | 78.2 MiB | 1.00 | 308.2MiB |")
        self.assertEqual(rows[0], "| 256 | true | true | 17,949 | 13,960-18,124 | 0.97x | 77.0 MiB | 0.98 | 295.8MiB |")
        self.assertEqual(list(fused.rows(50304, figures))[0][:10], "| 50,304 |")

    def test_fused_round_figures(self):
        tps, act = fused.round_figures(steps("step_time_s", [9.0, 0.1, 0.2, 0.3],
                                             state_bytes={"activations": 5}))
        self.assertAlmostEqual(tps, 16 * 128 / 0.2)
        self.assertEqual(act, 5)

    def test_lora(self):
        lines = steps("tokens_per_s", [1.0, 10012, 10000, 10100],
                      state_bytes={"grads": 3.0 * MIB, "optimizer": 6.0 * MIB})
        done = "[t] info done: 200 steps in 5.1s, val_loss 3.2666 -> 0.1440, 10012 tokens/s, peak RSS 345.3MiB"
        self.assertEqual(lora.row("llama-tiny (0.79M)", "full", lines, done),
                         "| llama-tiny (0.79M) | full | 3.0 MiB | 6.0 MiB | 10,012 | 345.3MiB | 3.2666 -> 0.1440 |")
        big = steps("tokens_per_s", [1.0, 3.2], state_bytes={"grads": 4196.4 * MIB, "optimizer": 8392.7 * MIB})
        self.assertEqual(lora.row("llama-1b (1.1B)", "full", big, done.replace("345.3MiB", "17.7GiB")),
                         "| llama-1b (1.1B) | full | 4,196.4 MiB | 8,392.7 MiB | 3 | 17.7GiB | 3.2666 -> 0.1440 |")

    def test_prepare(self):
        output = ("wrote /o/p: 110 documents in 540 chunks, 537.0MB read (537.0MB in the files) -> "
                  "208239790 tokens (2.58 bytes a token; 206000000 train, 2239790 val, uint16, vocab "
                  "2000) in 490.7s, 1.1 MB/s on 1 thread; tokenizer sentencepiece\nmax RSS KiB 331776\n")
        self.assertEqual(prepare.row("sentencepiece", "1", output, "324 MiB"),
                         "| sentencepiece | 1 | 208,239,790 | 2.58 | 490.7 | 1.1 | 324 MiB |")

    def test_jsonl(self):
        output = "wrote /o/j: 3194200 documents ... in 50.1s, 11.6 MB/s on 1 thread; tokenizer bpe\n"
        self.assertEqual(jsonl.row("hf-bpe", "gzip", 210, "1", output, "176 MiB"),
                         "| hf-bpe | gzip | 210 MB | 1 | 50.1 | 11.6 | 176 MiB |")

    def test_optimizer(self):
        lines = [{"time_s": {"optimizer": 1.0}, "step_time_s": 9.0}] * 2 + [
            {"time_s": {"optimizer": o}, "step_time_s": s, "state_bytes": {"optimizer": 1.5 * 2**30}}
            for o, s in ((0.100, 0.5), (0.120, 0.7), (0.110, 0.6), (0.130, 0.8))]
        self.assertEqual(optimizer.row("build/vescale-train", "float32", lines),
                         "| build/vescale-train | float32 | 115 | 650 | 1.50 GiB |")


class AlignedRows(unittest.TestCase):
    """The expected strings are bash's printf of the old scripts/bench.sh on the same figures."""

    def test_train(self):
        self.assertEqual(train.line("1 process", "60 steps in 5.9s, 10451 tokens/s"),
                         "1 process                60 steps in 5.9s, 10451 tokens/s")

    def test_zero(self):
        self.assertEqual(zero.header(),
                         "dp   zero    tokens/s       params        grads    optimizer     peak RSS dp bytes/step")
        last = {"state_bytes": {"params": 3337216, "grads": 1668608, "optimizer": 3337216},
                "comm_bytes_by_kind": {"dp": {"reduce_scatter": 1668608, "all_gather": 1668608}}}
        self.assertEqual(zero.row(2, 2, "15518", "224.2MiB", last),
                         "2    2          15518     3.18 MiB     1.59 MiB     3.18 MiB     224.2MiB ag 1.59 MiB, rs 1.59 MiB")
        plain = {"state_bytes": last["state_bytes"], "comm_bytes": {"dp": 3337216}}
        self.assertTrue(zero.row(2, 0, "1", "", plain).endswith(" 3.18 MiB"))

    def test_pipeline(self):
        self.assertEqual(pipeline.header(),
                         "schedule              m   tokens/s   bubble r0 / r1  simulated       peak RSS r0 / r1      in flight r0 / r1")
        self.assertEqual(pipeline.row("zbv", 4, "10962", "0.040000", ("7.6%", "215.0MiB", "s0: 4, s2: 1"),
                                      ("9.0%", "215.1MiB", "s1: 3, s3: 2")),
                         "zbv                   4      10962      7.6% / 9.0%   0.040000      215.0MiB / 215.1MiB "
                         "s0: 4, s2: 1 / s1: 3, s3: 2")

    def test_checkpoint(self):
        self.assertEqual(checkpoint.header(),
                         "format   mode         size     stall ms   write MB/s      dd MB/s   ratio  peak RSS r0")
        self.assertEqual(checkpoint.row("sharded", False, 301_000_000, "436.7MiB", 582.0,
                                        [(1000.0, 450.0), (1128.0, 460.0)]),
                         "sharded  sync       301 MB          455         1064          582    1.83     436.7MiB")


if __name__ == "__main__":
    unittest.main()
