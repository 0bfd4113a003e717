"""What a user needs to see when a process fails: the last lines of its log and the Python traceback."""
from __future__ import annotations

import re
from pathlib import Path

from .safefile import read_tail

TAIL_LINES = 20
_MPI_FIRST = re.compile(r"The first process to do so was:.*?Process name:\s*\[\[\d+,\d+\],(\d+)\].*?Exit code:\s*(-?\d+)",
                        re.S)
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")


def tail_text(path: Path, max_bytes: int = 256 * 1024) -> list[str]:
    try:
        data, size = read_tail(path, max_bytes)   # a regular file only: never a FIFO or /dev/zero
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]          # the first line may be cut
    return lines


def last_lines(lines: list[str], n: int = TAIL_LINES) -> list[str]:
    return lines[-n:]


def traceback_block(lines: list[str]) -> list[str]:
    """The last Python traceback in the log: from 'Traceback (most recent call last):' to the exception line."""
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lstrip().startswith("Traceback (most recent call last):"):
            start = i
            break
    if start is None:
        return []
    indent = len(lines[start]) - len(lines[start].lstrip())
    out = [lines[start]]
    for line in lines[start + 1:]:
        out.append(line)
        body = line[indent:] if len(line) >= indent else line
        if body and not body.startswith((" ", "\t")):
            break                  # the exception line ends the block
    return out


def mpi_first_failure(launcher_log: Path) -> tuple[int | None, int | None]:
    """(rank, exit code) of the first rank mpirun saw fail, from mpirun's own report."""
    text = "\n".join(tail_text(launcher_log))
    m = _MPI_FIRST.search(text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _MPI_SIGNAL.search(text)
    if m:
        return int(m.group(1)), 128 + int(m.group(2))
    return None, None
