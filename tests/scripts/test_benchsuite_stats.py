"""Medians over runs and rounds: the figures every table's row is made of."""
import unittest

import benchsuite_path  # noqa: F401
from benchsuite import stats


class Stats(unittest.TestCase):
    def test_median_min_max(self):
        self.assertEqual(stats.median_min_max([3.0, 1.0, 2.0, 10.0]), (2.5, 1.0, 10.0))

    def test_ratio_is_the_median_of_per_round_ratios(self):
        # Rounds 1.5, 0.5 and 1.0: the median of the ratios is 1.0, the ratio of medians 1.2.
        self.assertAlmostEqual(stats.round_ratio([3, 1, 2], [2, 2, 2]), 1.0)

    def test_ratio_of_medians_when_a_round_failed(self):
        self.assertAlmostEqual(stats.round_ratio([3, 1, 2], [2, 1]), 2 / 1.5)

    def test_median_after_first_leaves_the_first_step_out(self):
        lines = [{"t": 100.0}, {"t": 1.0}, {"t": 3.0}, {"t": 2.0}]
        self.assertEqual(stats.median_after_first(lines, lambda line: line["t"]), 2.0)


if __name__ == "__main__":
    unittest.main()
