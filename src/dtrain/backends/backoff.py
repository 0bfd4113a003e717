"""Polling intervals, for every backend and for following jobs: short while something happens, growing
by `factor` up to `cap` while nothing does."""
from __future__ import annotations

import time


class Backoff:
    def __init__(self, first: float = 0.2, cap: float = 5.0, factor: float = 1.5):
        self.first, self.cap, self.factor = first, cap, factor
        self.delay = first

    def reset(self) -> None:
        """Something changed: the next interval is `first` again."""
        self.delay = self.first

    def _grow(self) -> None:
        self.delay = min(self.cap, self.delay * self.factor)

    def next(self, progressed: bool) -> float:
        """The interval to wait after a pass: `first` when it made progress (lines came), else longer
        than the last one."""
        if progressed:
            self.reset()
        else:
            self._grow()
        return self.delay

    def sleep(self, deadline: float | None = None, at_least: float | None = None) -> None:
        """Wait the current interval (at least `at_least`, never past the monotonic `deadline`); the next
        one is longer."""
        d = max(self.delay, at_least or 0.0)
        if deadline is not None:
            d = max(0.0, min(d, deadline - time.monotonic()))
        time.sleep(d)
        self._grow()
