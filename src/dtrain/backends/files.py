"""A job's files as a backend offers them for `dtrain download`: where each goes, how big it is, and a
reader from any byte offset (so an interrupted download resumes where it stopped)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class JobFile:
    path: str                                       # where it goes under the download folder (posix, relative)
    size: int
    read_from: Callable[[int], Iterator[bytes]]     # the bytes from this offset to the end, in chunks
    md5: bytes | None = None                        # the content's MD5 where the source knows it cheaply


def output_path(output: str, rel: str) -> str:
    """Where an output's file goes: named-outputs/OUTPUT/REL (az ml job download's layout)."""
    return f"named-outputs/{output}/{rel}"


def log_path(rel: str) -> str:
    """Where a log goes: logs/REL (user_logs/std_log_process_0.txt, ...)."""
    return f"logs/{rel}"
