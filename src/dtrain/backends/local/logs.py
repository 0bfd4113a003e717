"""Reading a job's logs while other processes write them.

Each file is read incrementally from where the previous read stopped, CHUNK bytes at a time, and its
lines are handed on one by one (backends/lines.py), so memory stays flat whatever the log's size. A
last line without its newline is held back until the newline arrives or the job is terminal (then it
is emitted as it is). With follow, the job's status is checked BEFORE each pass: the pass that
follows the first terminal status drains every file to its end, so no line is lost or repeated.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from ..base import LogLine
from ..lines import LineBuffer
from ..safefile import NotRegularFile, open_regular

POLL_S = 0.1
CHUNK = 64 * 1024          # per read: at most this many bytes (and their lines) in memory at once


class FileTail:
    def __init__(self, path: Path, rank: int | None, node: int | None, source: str,
                 on_skip: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.rank, self.node, self.source = rank, node, source
        self.on_skip = on_skip
        self.skipped = False        # not a regular file (a FIFO, a symlink to /dev/zero): never read
        self._f: BinaryIO | None = None
        self._lines = LineBuffer()
        self.at_end = True          # whether the last read reached the end of the file

    def read(self, final: bool = False) -> list[LogLine]:
        """The lines in the next CHUNK bytes. With final, a partial last line is emitted too once the
        end of the file is reached."""
        if self._f is None:
            self.at_end = True
            if self.skipped:
                return []
            try:
                self._f = open_regular(self.path)
            except NotRegularFile as exc:
                self.skipped = True
                if self.on_skip:
                    self.on_skip(f"{self.source}: {exc.kind}, not a regular file; its lines are skipped")
                return []
            except FileNotFoundError:
                return []
        data = self._f.read(CHUNK)
        self.at_end = len(data) < CHUNK
        return [LogLine(text=t, rank=self.rank, node=self.node, source=self.source)
                for t in self._lines.feed(data, final=final and self.at_end)]

    def drain(self, final: bool = False) -> Iterator[LogLine]:
        """Every line up to the end of the file, a chunk at a time."""
        while True:
            yield from self.read(final=final)
            if self.at_end:
                return

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None


def follow_logs(job_dir: Path, ranks: list[dict], *, follow: bool, is_terminal: Callable[[], bool],
                poll: float = POLL_S, on_skip: Callable[[str], None] | None = None) -> Iterator[LogLine]:
    """on_skip(text): told once of each log that is not a regular file (skipped, never read)."""
    tails = [FileTail(Path(job_dir) / r["log"], r.get("rank"), r.get("node"), r["log"], on_skip) for r in ranks]
    try:
        if not follow:
            terminal = is_terminal()
            for t in tails:
                yield from t.drain(final=terminal)
            return
        while True:
            terminal = is_terminal()
            got = False
            for t in tails:
                if terminal:                    # the last pass: everything left, to the end
                    yield from t.drain(final=True)
                    continue
                for line in t.read():           # one chunk per rank per pass keeps ranks interleaved
                    got = True
                    yield line
                got = got or not t.at_end
            if terminal:
                return
            if not got:
                time.sleep(poll)
    finally:
        for t in tails:
            t.close()
