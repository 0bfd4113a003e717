"""Every rank's log lines from an Azure ML job, read incrementally.

Run details (one GET through the SDK's run-history client) give the job's status and a SAS URL per
log file (user_logs/std_log_process_NN.txt for each rank, zero-padded or not, a parameter server's
..._NN_ps.txt placed after the workers, user_logs/std_log.txt without a distribution). Each file is
read with `Range: bytes=<offset>-<offset + CHUNK - 1>` (a form the Blob service documents)
from where the last read stopped, so no byte is fetched twice and no more than
CHUNK bytes are held at once, whatever the log's size; lines are made one by one as they are
consumed (backends/lines.py). A read that fails (dropped connection, 5xx, expired SAS) leaves the offset
where it was and is tried on the next pass: nothing is lost or repeated. A last line without its
newline is held until the newline arrives, or until the job is terminal. Status is checked BEFORE
each pass; the pass after the first terminal status drains what is left, then the iterator ends.

Cadence (backends/backoff.py): the next pass comes quickly while lines flow and backs off (x1.5, up to a
cap) while idle.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Generator, Iterator

from ...errors import LostTrack
from ...untrusted import redact
from ..backoff import Backoff
from ..base import LogLine, is_terminal
from ..lines import LineBuffer

# The service's names for user logs: std_log.txt (no distribution), std_log_process_N.txt with N
# zero-padded or not, and a TensorFlow parameter server's std_log_process_N_ps.txt, N counting parameter
# servers from 0 (the SDK's own rank-0 pattern, user_logs/std_log[\D]*[0]*(?:_ps)?\.txt, matches both
# worker 0's and the first parameter server's file).
_USER_LOG = re.compile(r"(?:^|/)std_log(?:[^\d/]*?(\d+))?(_ps)?\.txt$")
TAIL_BYTES = 64 * 1024
CHUNK = 1024 * 1024         # bytes per ranged GET: what one read holds in memory
_HEADERS = {"x-ms-version": "2021-08-06"}


def parse_log_name(name: str) -> tuple[int, str] | None:
    """(index, role) of a user log file name: role "ps" for a parameter server (index among them), else
    "worker" (index = rank); None when the name is not a per-process user log."""
    m = _USER_LOG.search(name)
    if not m:
        return None
    return int(m.group(1) or 0), "ps" if m.group(2) else "worker"


def rank_of(name: str, workers: int | None = None) -> int | None:
    """Global rank of a user log file name, in the spec layer's layout (spec/model.py: workers first,
    then parameter servers): parameter server k is rank workers + k. Without `workers` (a job without
    a TensorFlow distribution), a parameter server's file has no rank."""
    parsed = parse_log_name(name)
    if parsed is None:
        return None
    index, role = parsed
    if role == "ps":
        return None if workers is None else workers + index
    return index


def user_logs(log_files: dict, workers: int | None = None) -> dict[int, tuple[str, str]]:
    """rank -> (file name, url), for the user logs among a run's logFiles; `workers` places parameter
    servers' files after the workers (None: after the worker files there are). A numbered file wins over
    std_log.txt for rank 0."""
    parsed = {n: p for n in (log_files or {}) if n.startswith("user_logs/") and (p := parse_log_name(n))}
    if workers is None:
        workers = len({i for i, role in parsed.values() if role == "worker"}) or 1
    out: dict[int, tuple[str, str]] = {}
    for name in parsed:
        r = rank_of(name, workers)
        if r is not None and (r not in out or not name.endswith("/std_log.txt")):
            out[r] = (name, log_files[name])
    return out


def role_of(name: str) -> str | None:
    """"ps" or "worker" for a user log file name (None when it is not one)."""
    parsed = parse_log_name(name)
    return parsed[1] if parsed else None


class RangeError(Exception):
    pass


@dataclass
class Stats:
    requests: int = 0
    bytes: int = 0          # body bytes fetched from log files
    detail_calls: int = 0


class LogTail:
    """One log file: the offset read so far, whether more is known to be there, a partial last line."""

    def __init__(self, name: str, rank: int, node: int | None, chunk: int = CHUNK):
        self.name, self.rank, self.node = name, rank, node
        self.chunk = chunk
        self.offset = 0
        self.more = False       # the last read stopped before the end of the blob
        self._lines = LineBuffer()

    def fetch(self, session, url: str, stats: Stats | None = None, timeout=(5, 30)) -> bytes:
        """At most `chunk` new bytes from the offset (b"" when none). Raises RangeError/requests errors
        on failure, leaving the offset untouched."""
        end = self.offset + self.chunk - 1
        rng = f"bytes={self.offset}-{end}"
        resp = session.get(url, headers={"Range": rng, "x-ms-range": rng, **_HEADERS}, timeout=timeout,
                           stream=True)
        try:
            if stats is not None:
                stats.requests += 1
            if resp.status_code == 416 or resp.status_code == 404:
                self.more = False
                return b""                              # nothing past the offset (or not created yet)
            if resp.status_code == 206:
                cr = resp.headers.get("Content-Range")
                start = _range_start(cr)
                if start is not None and start != self.offset:
                    raise RangeError(f"asked for {rng}, got {cr}")
                data = resp.raw.read(self.chunk + 1, decode_content=True)
                total = _total_size(cr)
                self.more = total is not None and self.offset + len(data) < total
            elif resp.status_code == 200:               # a server that ignored Range: skip what we have
                data = _slice_stream(resp, self.offset, self.chunk)
                self.more = len(data) == self.chunk
            else:
                raise RangeError(f"HTTP {resp.status_code} reading {self.name}")
            if stats is not None:
                stats.bytes += len(data)
            return data[:self.chunk]
        finally:
            resp.close()

    def feed(self, data: bytes, final: bool = False) -> Iterator[LogLine]:
        """The complete lines (with final, all lines) once `data` is added; made as they are consumed."""
        self.offset += len(data)
        return (LogLine(text=t, rank=self.rank, node=self.node, source=self.name)
                for t in self._lines.feed(data, final=final))

    def flush(self) -> Iterator[LogLine]:
        return self.feed(b"", final=True)


def _slice_stream(resp, offset: int, size: int) -> bytes:
    """Bytes offset..offset+size of a whole-file answer, read without holding the whole file."""
    out = bytearray()
    skip = offset
    for block in resp.iter_content(64 * 1024):
        if skip:
            if len(block) <= skip:
                skip -= len(block)
                continue
            block, skip = block[skip:], 0
        out += block
        if len(out) >= size:
            break
    return bytes(out[:size])


def _range_start(content_range: str | None) -> int | None:
    m = re.match(r"bytes (\d+)-\d+/", content_range or "")
    return int(m.group(1)) if m else None


def follow_logs(details: Callable[[], tuple[str, dict]], *, follow: bool, rank: int | None = None,
                ppn: int = 1, workers: int | None = None, session=None, cadence: Backoff | None = None, max_failures: int = 6,
                stats: Stats | None = None, sleep=time.sleep) -> Iterator[LogLine]:
    """Lines of every rank (or one rank). `details()` returns (status, logFiles) and may raise; the
    iterator raises LostTrack after `max_failures` consecutive failed passes."""
    import requests

    own = session is None
    session = session or requests.Session()
    cadence = cadence or Backoff(0.5, 5.0)
    tails: dict[int, LogTail] = {}
    failures = 0
    try:
        while True:
            status, files, failures = _await_details(details, failures, max_failures, cadence, stats, sleep)
            terminal = is_terminal(status)
            got, read_failed = yield from _read_pass(_wanted_logs(files, rank, workers), tails, session, ppn, stats,
                                                     final=terminal and follow)
            failures = failures + 1 if read_failed else 0
            if not read_failed and (terminal or not follow):
                if terminal:
                    for t in tails.values():
                        yield from t.flush()
                return
            if failures >= max_failures:
                raise LostTrack("could not read the job's log files after repeated failures",
                                hint=_READ_AGAIN_HINT if follow else "try again")
            sleep(cadence.next(got and follow))
    finally:
        if own:
            session.close()


_READ_AGAIN_HINT = "the job keeps running; `dtrain logs NAME` reads them again"


def _await_details(details: Callable[[], tuple[str, dict]], failures: int, max_failures: int, cadence: Backoff,
                   stats: Stats | None, sleep) -> tuple[str, dict, int]:
    """(status, logFiles, failures) once details() answers. azure-core has already retried each call, so a
    transient failure waits at the idle cadence and counts as a failed pass (LostTrack at max_failures);
    any other failure is raised as it is."""
    while True:
        try:
            status, files = details()
            if stats is not None:
                stats.detail_calls += 1
            return status, files, failures
        except Exception as exc:
            from .errors import transient

            failures += 1
            if not transient(exc):
                raise
            if failures >= max_failures:
                raise LostTrack(f"lost track of the job's logs after {failures} failed reads: "
                                f"{type(exc).__name__}: {redact(str(exc))}", hint=_READ_AGAIN_HINT) from exc
            sleep(cadence.next(False))


def _wanted_logs(files: dict, rank: int | None, workers: int | None = None) -> list[tuple[int, str, str]]:
    """(rank, file name, url) of the user logs to read, by rank: all of them, or the one rank asked for."""
    return [(r, name, url) for r, (name, url) in sorted(user_logs(files, workers).items())
            if rank is None or r == rank]


def _read_pass(pending: list[tuple[int, str, str]], tails: dict[int, LogTail], session, ppn: int,
               stats: Stats | None, final: bool) -> Generator[LogLine, None, tuple[bool, bool]]:
    """One pass: a chunk of each file in turn until each is read to its current end, so that no rank
    waits behind a long log. Lines are yielded as they are made; with `final` (the job has ended) a
    file's last line is released without its newline. Returns (any line came, a read failed); a failed
    read keeps its offset, so the next pass resumes there."""
    got = read_failed = False
    while pending:
        more = []
        for r, name, url in pending:
            tail = _tail(tails, r, name, ppn)
            try:
                data = tail.fetch(session, url, stats)
            except Exception:
                read_failed = True
                continue
            for line in tail.feed(data, final=final and not tail.more):
                got = True
                yield line
            if tail.more:
                more.append((r, name, url))
        pending = more
    return got, read_failed


def _tail(tails: dict[int, LogTail], r: int, name: str, ppn: int) -> LogTail:
    """The rank's LogTail, made on first sight: its offset and partial line carry over between passes."""
    tail = tails.get(r)
    if tail is None:
        tail = tails[r] = LogTail(name, r, r // max(ppn, 1))
    return tail


def tail_lines(session, url: str, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last lines of a log file: its size from a 0-0 range (Content-Range: bytes 0-0/SIZE, or
    bytes */0 with 416 when empty), then `bytes=START-END` for the last max_bytes. Only range forms
    the Blob service documents; a suffix range (bytes=-N) is not one of them."""
    try:
        size = _blob_size(session, url)
        if not size:
            return []
        start = max(0, size - max_bytes)
        rng = f"bytes={start}-{size - 1}"
        resp = session.get(url, headers={"Range": rng, "x-ms-range": rng, **_HEADERS}, timeout=(5, 30),
                           stream=True)
        try:
            if resp.status_code == 206:
                data = resp.raw.read(max_bytes + 1, decode_content=True)[:max_bytes]
            elif resp.status_code == 200:           # range ignored: keep only the end, chunk by chunk
                data = b""
                for block in resp.iter_content(64 * 1024):
                    data = (data + block)[-max_bytes:]
            else:
                return []
        finally:
            resp.close()
    except Exception:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]                   # the first line may be cut
    return lines


def _blob_size(session, url: str) -> int | None:
    resp = session.get(url, headers={"Range": "bytes=0-0", "x-ms-range": "bytes=0-0", **_HEADERS},
                       timeout=(5, 30), stream=True)
    try:
        cr = resp.headers.get("Content-Range") or ""
        if resp.status_code == 206:
            return _total_size(cr)
        if resp.status_code == 416:
            m = re.match(r"bytes \*/(\d+)", cr)
            return int(m.group(1)) if m else 0
        if resp.status_code == 200:
            length = resp.headers.get("Content-Length")
            return int(length) if length and length.isdigit() else None
        return None
    finally:
        resp.close()


def _total_size(content_range: str | None) -> int | None:
    m = re.match(r"bytes \d+-\d+/(\d+)", content_range or "")
    return int(m.group(1)) if m else None
