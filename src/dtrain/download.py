"""`dtrain download`: a job's files written under a folder, byte-exact and resumable.

Every file is written to `PATH.part` and renamed when complete, so a file under its own name is whole. A
second run skips every file already there with the same size (and MD5 where the source knows it), and
resumes a `.part` from its size; a file already there that differs is never overwritten: the download is
refused before anything is fetched, naming it. Backends say which files there are (Backend.files); this
module fetches them and imports no backend.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

from .backends.files import JobFile
from .errors import UsageError


@dataclass
class DownloadReport:
    folder: str
    fetched: list = field(default_factory=list)     # paths fetched now (whole or resumed)
    skipped: list = field(default_factory=list)     # paths already complete
    bytes: int = 0                                  # bytes fetched now

    def to_dict(self) -> dict:
        return {"folder": self.folder, "fetched": self.fetched, "skipped": self.skipped, "bytes": self.bytes}


def _target(root: Path, rel: str) -> Path:
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or ".." in parts:
        raise UsageError(f"the job has a file named '{rel}', which would land outside the download folder")
    return root.joinpath(*parts)


def _md5(path: Path) -> bytes:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def _complete(path: Path, f: JobFile) -> bool:
    """The file is already there, whole; UsageError-worthy (False, caller decides) when it differs."""
    return path.is_file() and path.stat().st_size == f.size and (f.md5 is None or _md5(path) == f.md5)


def plan(files: Iterable[JobFile], root: Path) -> tuple[list, list]:
    """(files to fetch, paths already complete); UsageError naming the files there that differ."""
    todo, done, different = [], [], []
    for f in files:
        path = _target(root, f.path)
        if _complete(path, f):
            done.append(f.path)
        elif path.exists():
            different.append(f.path)
        else:
            todo.append((f, path))
    if different:
        shown = ", ".join(different[:5]) + (f" and {len(different) - 5} more" if len(different) > 5 else "")
        raise UsageError(f"{len(different)} file(s) in {root} differ from the job's and would be overwritten: {shown}",
                         hint="nothing was downloaded; move them away, or download into another folder with --path")
    return todo, done


def fetch(f: JobFile, path: Path, on_bytes: Callable[[int], None] = lambda n: None) -> int:
    """Write the file, resuming a .part left by an interrupted run; returns the bytes fetched now."""
    part = path.with_name(path.name + ".part")
    path.parent.mkdir(parents=True, exist_ok=True)
    offset = part.stat().st_size if part.is_file() else 0
    if offset > f.size:                 # the source shrank since: start again
        part.unlink()
        offset = 0
    got = 0
    with open(part, "ab") as out:
        if offset < f.size or f.size == 0:
            for block in f.read_from(offset):
                out.write(block)
                got += len(block)
                on_bytes(len(block))
        out.flush()
        os.fsync(out.fileno())
    if part.stat().st_size != f.size or (f.md5 is not None and _md5(part) != f.md5):
        part.unlink()                   # never keep bytes that are not the job's under either name
        raise UsageError(f"{f.path}: the source changed while it was read (expected {f.size} bytes)",
                         hint="run the same command again")
    os.replace(part, path)
    return got


def download(files: Iterable[JobFile], root: Path, progress=None) -> DownloadReport:
    """Every file under root; progress(total_bytes) -> a callable taking byte counts, or None."""
    root.mkdir(parents=True, exist_ok=True)
    todo, done = plan(list(files), root)
    report = DownloadReport(str(root), skipped=done)
    advance = progress(sum(f.size for f, _ in todo)) if progress and todo else (lambda n: None)
    for f, path in todo:
        report.bytes += fetch(f, path, advance)
        report.fetched.append(f.path)
    return report
