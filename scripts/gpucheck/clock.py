"""The call's clock: seconds since it started, the DEADLINE after which nothing new starts and
the END by which every run's time limit is cut, so that one call of 8 minutes holds it all."""
import time

DEFAULT_DEADLINE = 420  # seconds
END_AFTER_DEADLINE = 60  # END's default: DEADLINE + this
SHORTEST_LIMIT = 5  # a run's limit is never cut below this


class Clock:
    def __init__(self, deadline, end, now=time.monotonic):
        self._now = now
        self._started = now()
        self.deadline = deadline
        self.end = end

    @classmethod
    def from_environment(cls, env, now=time.monotonic):
        """DEADLINE (default 420) and END (default DEADLINE + 60) from `env`; "" is unset."""
        deadline = int(env.get("DEADLINE") or DEFAULT_DEADLINE)
        return cls(deadline, int(env.get("END") or deadline + END_AFTER_DEADLINE), now)

    def seconds(self):
        """Whole seconds since the call started (bash's SECONDS)."""
        return int(self._now() - self._started)

    def say(self, text):
        """A progress line with the call's time in it."""
        print(f"[gpu-check {self.seconds()}s] {text}", flush=True)

    def may_start(self, what):
        """Whether `what` may still start; past DEADLINE it is skipped, saying so, so that the
        table comes back inside the call's time."""
        if self.seconds() >= self.deadline:
            self.say(f"skipped {what}: past the deadline ({self.deadline} s)")
            return False
        return True

    def limit(self, seconds):
        """A run's time limit: `seconds`, cut to what is left before END (5 s at the least)."""
        return min(seconds, max(self.end - self.seconds(), SHORTEST_LIMIT))

    def postpone(self, seconds):
        """Moves DEADLINE and END later (the CPU's build is not part of the budget)."""
        self.deadline += seconds
        self.end += seconds
