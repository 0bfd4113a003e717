"""Every rank's log lines from an Azure ML job, read incrementally.

Run details (one GET through the SDK's run-history client) give the job's status and a SAS URL per
log file (user_logs/std_log_process_NN.txt for each rank, user_logs/std_log.txt without a
distribution). Each file is read with `Range: bytes=<offset>-` from where the last read stopped, so
no byte is fetched twice. A read that fails (dropped connection, 5xx, expired SAS) leaves the offset
where it was and is tried on the next pass: nothing is lost or repeated. A last line without its
newline is held until the newline arrives, or until the job is terminal. Status is checked BEFORE
each pass; the pass after the first terminal status drains what is left, then the iterator ends.

Cadence: the next pass comes quickly while lines flow and backs off (x1.5, up to a cap) while idle.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from ...errors import LostTrack
from ..base import LogLine, is_terminal

_RANK_FILE = re.compile(r"(?:^|/)std_log_process_(\d+)\.txt$")
_SINGLE_FILE = re.compile(r"(?:^|/)std_log\.txt$")
TAIL_BYTES = 64 * 1024


def rank_of(name: str) -> int | None:
    """Rank of a user log file name; None when it is not a per-process user log."""
    m = _RANK_FILE.search(name)
    if m:
        return int(m.group(1))
    if _SINGLE_FILE.search(name):
        return 0
    return None


def user_logs(log_files: dict) -> dict[int, tuple[str, str]]:
    """rank -> (file name, url), for the user logs among a run's logFiles."""
    out = {}
    for name, url in (log_files or {}).items():
        if not name.startswith("user_logs/"):
            continue
        r = rank_of(name)
        if r is not None and (r not in out or _RANK_FILE.search(name)):
            out[r] = (name, url)
    return out


class RangeError(Exception):
    pass


@dataclass
class Stats:
    requests: int = 0
    bytes: int = 0          # body bytes fetched from log files
    detail_calls: int = 0


class LogTail:
    """One log file: the offset read so far, and a partial last line held back."""

    def __init__(self, name: str, rank: int, node: int | None):
        self.name, self.rank, self.node = name, rank, node
        self.offset = 0
        self._buf = b""

    def fetch(self, session, url: str, stats: Stats | None = None, timeout=(5, 30)) -> bytes:
        """New bytes since the offset (b"" when none). Raises RangeError/requests errors on failure,
        leaving the offset untouched."""
        headers = {"Range": f"bytes={self.offset}-", "x-ms-range": f"bytes={self.offset}-",
                   "x-ms-version": "2021-08-06"}
        resp = session.get(url, headers=headers, timeout=timeout)
        if stats is not None:
            stats.requests += 1
            stats.bytes += len(resp.content)
        if resp.status_code == 416 or resp.status_code == 404:
            return b""                                  # nothing past the offset (or not created yet)
        if resp.status_code == 206:
            start = _range_start(resp.headers.get("Content-Range"))
            if start is not None and start != self.offset:
                raise RangeError(f"asked for bytes {self.offset}-, got {resp.headers.get('Content-Range')}")
            return resp.content
        if resp.status_code == 200:                     # a server that ignored Range: skip what we have
            return resp.content[self.offset:]
        raise RangeError(f"HTTP {resp.status_code} reading {self.name}")

    def feed(self, data: bytes, final: bool = False) -> list[LogLine]:
        self.offset += len(data)
        self._buf += data
        if not self._buf:
            return []
        parts = self._buf.split(b"\n")
        self._buf = parts.pop()
        if final and self._buf:
            parts.append(self._buf)
            self._buf = b""
        return [LogLine(text=p.decode("utf-8", "replace").rstrip("\r"), rank=self.rank, node=self.node,
                        source=self.name) for p in parts]

    def flush(self) -> list[LogLine]:
        return self.feed(b"", final=True)


def _range_start(content_range: str | None) -> int | None:
    m = re.match(r"bytes (\d+)-\d+/", content_range or "")
    return int(m.group(1)) if m else None


class Cadence:
    """Fast while lines flow, backing off while idle."""

    def __init__(self, first: float = 0.5, cap: float = 5.0, factor: float = 1.5):
        self.first, self.cap, self.factor = first, cap, factor
        self.delay = first

    def next(self, got_lines: bool) -> float:
        self.delay = self.first if got_lines else min(self.cap, self.delay * self.factor)
        return self.delay


def follow_logs(details: Callable[[], tuple[str, dict]], *, follow: bool, rank: int | None = None,
                ppn: int = 1, session=None, cadence: Cadence | None = None, max_failures: int = 6,
                stats: Stats | None = None, sleep=time.sleep) -> Iterator[LogLine]:
    """Lines of every rank (or one rank). `details()` returns (status, logFiles) and may raise; the
    iterator raises LostTrack after `max_failures` consecutive failed passes."""
    import requests

    own = session is None
    session = session or requests.Session()
    cadence = cadence or Cadence()
    tails: dict[int, LogTail] = {}
    failures = 0
    try:
        while True:
            try:
                status, files = details()
                if stats is not None:
                    stats.detail_calls += 1
            except Exception as exc:  # transient (azure-core already retried): try again, then give up
                from .errors import transient

                failures += 1
                if failures >= max_failures or not transient(exc):
                    if not transient(exc):
                        raise
                    raise LostTrack(f"lost track of the job's logs after {failures} failed reads: "
                                    f"{type(exc).__name__}: {exc}",
                                    hint="the job keeps running; `dtrain logs NAME` reads them again") from exc
                sleep(cadence.next(False))
                continue
            terminal = is_terminal(status)
            got = False
            read_failed = False
            for r, (name, url) in sorted(user_logs(files).items()):
                if rank is not None and r != rank:
                    continue
                tail = tails.get(r)
                if tail is None:
                    tail = tails[r] = LogTail(name, r, r // max(ppn, 1))
                try:
                    data = tail.fetch(session, url, stats)
                except Exception:                       # keep the offset: next pass resumes there
                    read_failed = True
                    continue
                lines = tail.feed(data, final=terminal and follow)
                if lines:
                    got = True
                    yield from lines
            failures = failures + 1 if read_failed else 0
            if not follow:
                if not read_failed:
                    if terminal:
                        for t in tails.values():
                            yield from t.flush()
                    return
                if failures >= max_failures:
                    raise LostTrack("could not read the job's log files after repeated failures", hint="try again")
                sleep(cadence.next(False))
                continue
            if terminal and not read_failed:
                for t in tails.values():
                    yield from t.flush()
                return
            if failures >= max_failures:
                raise LostTrack("could not read the job's log files after repeated failures",
                                hint="the job keeps running; `dtrain logs NAME` reads them again")
            sleep(cadence.next(got))
    finally:
        if own:
            session.close()


def tail_lines(session, url: str, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last lines of a log file (one suffix-range GET)."""
    try:
        resp = session.get(url, headers={"Range": f"bytes=-{max_bytes}", "x-ms-range": f"bytes=-{max_bytes}",
                                         "x-ms-version": "2021-08-06"}, timeout=(5, 30))
    except Exception:
        return []
    if resp.status_code not in (200, 206):
        return []
    data = resp.content[-max_bytes:]
    lines = data.decode("utf-8", "replace").splitlines()
    total = _total_size(resp.headers.get("Content-Range"))
    if (total or len(resp.content)) > max_bytes and lines:
        lines = lines[1:]                   # the first line may be cut
    return lines


def _total_size(content_range: str | None) -> int | None:
    m = re.match(r"bytes \d+-\d+/(\d+)", content_range or "")
    return int(m.group(1)) if m else None
