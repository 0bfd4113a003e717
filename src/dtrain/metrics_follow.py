"""Following one job's metrics as they are logged (`dtrain metrics --follow`, and the Python API)."""
from __future__ import annotations

import time
from typing import Callable, Iterator

from .backends.base import JobInfo, MetricsReader
from .errors import LostTrack

FAILURES_TOLERATED = 5     # reads in a row that may fail (the reader keeps its place) before giving up


def follow_metrics(reader: MetricsReader, status: Callable[[], JobInfo], interval: float = 2.0,
                   sleep: Callable[[float], None] = time.sleep) -> Iterator[tuple]:
    """(new points, all points, JobInfo) after each poll of an incremental reader, until the job is
    terminal; the last poll comes after the status said so, so the points logged at the very end are in it."""
    failures = 0
    while True:
        info = status()                       # before the poll: a terminal status means nothing follows
        try:
            new = reader.poll()
            failures = 0
        except LostTrack:                     # the reader keeps its place: the next poll goes on from it
            failures += 1
            if failures >= FAILURES_TOLERATED or info.terminal:
                raise
            sleep(interval)
            continue
        yield new, reader.points, info
        if info.terminal:
            return
        sleep(interval)
