"""Reading a job's logs while other processes write them.

Each file is read incrementally from where the previous read stopped; a last line without its newline
is held back until the newline arrives or the job is terminal (then it is emitted as it is). With
follow, the job's status is checked BEFORE each pass: the pass that follows the first terminal status
drains everything left, so no line is lost or repeated.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

from ..base import LogLine

POLL_S = 0.1


class FileTail:
    def __init__(self, path: Path, rank: int | None, node: int | None, source: str):
        self.path = Path(path)
        self.rank, self.node, self.source = rank, node, source
        self._f = None
        self._buf = b""

    def read(self, final: bool = False) -> list[LogLine]:
        if self._f is None:
            try:
                self._f = open(self.path, "rb")
            except FileNotFoundError:
                return []
        data = self._f.read()
        if data:
            self._buf += data
        if not self._buf:
            return []
        parts = self._buf.split(b"\n")
        self._buf = parts.pop()             # b"" when the data ended with a newline
        if final and self._buf:
            parts.append(self._buf)
            self._buf = b""
        return [LogLine(text=p.decode("utf-8", "replace").rstrip("\r"), rank=self.rank, node=self.node,
                        source=self.source) for p in parts]

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None


def follow_logs(job_dir: Path, ranks: list[dict], *, follow: bool,
                is_terminal: Callable[[], bool], poll: float = POLL_S) -> Iterator[LogLine]:
    tails = [FileTail(Path(job_dir) / r["log"], r.get("rank"), r.get("node"), r["log"]) for r in ranks]
    try:
        if not follow:
            terminal = is_terminal()
            for t in tails:
                yield from t.read(final=terminal)
            return
        while True:
            terminal = is_terminal()
            got = False
            for t in tails:
                lines = t.read(final=terminal)
                if lines:
                    got = True
                    yield from lines
            if terminal:
                return
            if not got:
                time.sleep(poll)
    finally:
        for t in tails:
            t.close()
