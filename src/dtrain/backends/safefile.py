"""Reading files a job wrote, whatever the job left there.

A job's folders (its rank logs, its MLflow store) are written by the user's processes, so an entry may
be anything: a symlink to /dev/zero (endless bytes), a FIFO (an open that blocks until a writer comes),
a device, a socket. dtrain reads only regular files: `lstat` first (nothing else is even opened), then
`open(O_NOFOLLOW | O_NONBLOCK)` and `fstat` on the descriptor (the entry may have been swapped in
between), and reads are bounded by the caller. Anything else raises NotRegularFile, which names the
entry and what it is, so the caller can skip it with a note.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class NotRegularFile(OSError):
    """The entry exists but is not a regular file: it is skipped, never read."""

    def __init__(self, path: Path, kind: str):
        super().__init__(errno.EINVAL, f"{path} is {kind}, not a regular file: skipped")
        self.path, self.kind = Path(path), kind


def kind_of(mode: int, path: Path | None = None) -> str:
    for test, name in _KINDS:
        if test(mode):
            if name == "a symlink" and path is not None:
                try:
                    return f"a symlink to {os.readlink(path)}"
                except OSError:
                    pass
            return name
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading when it is a regular file (not through a symlink). FileNotFoundError
    when it is gone; NotRegularFile when it is anything else."""
    path = Path(path)
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, kind_of(st.st_mode, path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:            # swapped for a symlink since the lstat
            raise NotRegularFile(path, "a symlink") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, kind_of(st.st_mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_tail(path: Path, max_bytes: int) -> tuple[bytes, int]:
    """The last `max_bytes` bytes of a regular file and its size then (raises as open_regular)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - max_bytes))
        return f.read(max_bytes), size


def lines_of(path: Path, max_line: int = 8192) -> Iterator[str]:
    """Every line of a regular file, one at a time (raises as open_regular at the first next()): memory
    stays flat whatever the file's size. A line longer than max_line bytes is cut there; the rest of it is
    read and dropped in max_line pieces, so line numbers stay true."""
    with open_regular(path) as f:
        while True:
            raw = f.readline(max_line)
            if not raw:
                return
            if not raw.endswith(b"\n"):
                while True:                       # the rest of an over-long line
                    more = f.readline(max_line)
                    if not more or more.endswith(b"\n"):
                        break
            yield raw.decode("utf-8", "replace").rstrip("\r\n")
