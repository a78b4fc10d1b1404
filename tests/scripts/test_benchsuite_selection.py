"""BENCH's choice of tables: the default set, a comma list in printing order, unknown names."""
import unittest

import benchsuite_path  # noqa: F401
from benchsuite import context, selection, tables


class Selection(unittest.TestCase):
    def test_default_is_every_table_but_the_long_ones(self):
        self.assertEqual(selection.selected(None),
                         ["comm", "peers", "train", "pipeline", "zero", "checkpoint", "export",
                          "recompute", "cp", "generate", "moe", "flight", "fused"])
        self.assertEqual(selection.selected(""), selection.selected(None))

    def test_a_list_prints_in_the_tables_order(self):
        self.assertEqual(selection.selected("lora,zero,comm"), ["comm", "zero", "lora"])
        self.assertEqual(selection.selected("muon-cost,muon,"), ["muon", "muon-cost"])

    def test_an_unknown_name_is_refused_with_the_closest(self):
        with self.assertRaisesRegex(selection.SelectionError, "'pipline'.*did you mean pipeline"):
            selection.selected("train,pipline")

    def test_every_table_has_its_function(self):
        self.assertEqual(list(tables.TABLES), list(selection.TABLES))


class Context(unittest.TestCase):
    def test_binaries_default_to_the_build_folder(self):
        ctx = context.from_env({"BUILD_DIR": "b"}, [], "/o")
        self.assertEqual((ctx.train, ctx.plain, ctx.flight, ctx.wheel_train),
                         ("b/vescale-train", "b/vescale-bench-plain", "b/vescale-bench-flight",
                          "build-wheel/vescale-train"))
        self.assertEqual(ctx.sizes, ["--sizes", "1K,64K,1M,16M"])
        self.assertEqual(ctx.path("x", "y"), "/o/x/y")

    def test_named_binaries_and_sizes_win(self):
        ctx = context.from_env({"VESCALE_TRAIN": "/t", "VESCALE_BENCH_FLIGHT": "/f",
                                "VESCALE_TRAIN_WHEEL": "/w", "BUILD_DIR": ""},
                               ["--sizes", "1K"], "/o")
        self.assertEqual((ctx.train, ctx.plain, ctx.flight, ctx.wheel_train),
                         ("/t", "build/vescale-bench-plain", "/f", "/w"))
        self.assertEqual(ctx.sizes, ["--sizes", "1K"])


if __name__ == "__main__":
    unittest.main()
