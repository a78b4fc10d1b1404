"""gpucheck.clock: the deadline after which nothing starts, the END that cuts each run's limit."""
import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck.clock import Clock  # noqa: E402


class FakeTime:
    """A monotonic clock the test moves by hand."""
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def clock_at(seconds, deadline=420, end=480):
    time = FakeTime()
    clock = Clock(deadline, end, time)
    time.now += seconds
    return clock


class Deadlines(unittest.TestCase):
    def test_defaults_come_from_the_environment(self):
        clock = Clock.from_environment({})
        self.assertEqual((clock.deadline, clock.end), (420, 480))
        clock = Clock.from_environment({"DEADLINE": "100"})
        self.assertEqual((clock.deadline, clock.end), (100, 160))
        clock = Clock.from_environment({"DEADLINE": "100", "END": "130"})
        self.assertEqual((clock.deadline, clock.end), (100, 130))
        clock = Clock.from_environment({"DEADLINE": "", "END": ""})  # set but empty: unset
        self.assertEqual((clock.deadline, clock.end), (420, 480))

    def test_seconds_are_whole(self):
        self.assertEqual(clock_at(12.9).seconds(), 12)

    def test_may_start_until_the_deadline(self):
        self.assertTrue(clock_at(419.9).may_start("parity"))
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            self.assertFalse(clock_at(420).may_start("parity"))
        self.assertEqual(said.getvalue(),
                         "[gpu-check 420s] skipped parity: past the deadline (420 s)\n")

    def test_a_deadline_of_zero_skips_everything(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertFalse(clock_at(0, deadline=0).may_start("bench"))

    def test_limit_is_cut_to_end(self):
        self.assertEqual(clock_at(100).limit(120), 120)  # 380 s left
        self.assertEqual(clock_at(400).limit(120), 80)
        self.assertEqual(clock_at(478).limit(120), 5)  # 5 s at the least
        self.assertEqual(clock_at(600).limit(120), 5)
        self.assertEqual(clock_at(600).limit(3), 3)

    def test_postpone_moves_deadline_and_end(self):
        clock = clock_at(500)
        clock.postpone(200)
        self.assertEqual((clock.deadline, clock.end), (620, 680))
        self.assertTrue(clock.may_start("parity"))
        self.assertEqual(clock.limit(240), 180)


if __name__ == "__main__":
    unittest.main()
