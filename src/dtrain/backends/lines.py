"""Bytes in, log lines out, in bounded memory: what both backends' log readers share.

A reader feeds the bytes it read (a bounded chunk at a time) and gets the complete lines back one by
one, lazily, so a chunk of a million short lines never becomes a million objects at once. A last line
without its newline is held until the newline arrives or the reader says the log is final. A "line"
longer than MAX_LINE is passed on in MAX_LINE pieces, so one giant line cannot grow the buffer.
"""
from __future__ import annotations

from typing import Iterator

MAX_LINE = 1024 * 1024


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def _cut(data: bytes, limit: int) -> int:
    """Where to cut `data` at about `limit` bytes without splitting a UTF-8 character."""
    cut = limit
    while cut > limit - 4 and cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut if cut > 0 else limit


class LineBuffer:
    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self._held = b""

    @property
    def held(self) -> int:
        """Bytes of a partial last line held back."""
        return len(self._held)

    def feed(self, data: bytes, final: bool = False) -> Iterator[str]:
        """The complete lines in held bytes + data; with final, the partial last line too.
        Consume the iterator fully: the held part is updated as it goes."""
        buf = self._held + data if self._held else data
        self._held = b""
        start = 0
        find = buf.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            yield _text(buf[start:nl])
            start = nl + 1
        rest = buf[start:]
        del buf
        while len(rest) > self.max_line:
            cut = _cut(rest, self.max_line)
            yield _text(rest[:cut])
            rest = rest[cut:]
        if final and rest:
            yield _text(rest)
            rest = b""
        self._held = rest
