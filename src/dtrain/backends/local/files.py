"""A local job's files for `dtrain download`: its outputs (where plan.json says each was written: the job
folder's outputs/NAME, or a local datastore folder) and its logs (user_logs/, system_logs/)."""
from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path
from typing import Iterator

from ...errors import UsageError
from ..files import CHUNK, JobFile, log_path, output_path

LOG_FOLDERS = ("user_logs", "system_logs")


def _read(path: Path, size: int, offset: int) -> Iterator[bytes]:
    """The file's bytes from offset up to the size it had when listed (a log may grow meanwhile)."""
    left = size - offset
    with open(path, "rb") as f:
        f.seek(offset)
        while left > 0:
            block = f.read(min(CHUNK, left))
            if not block:
                return
            left -= len(block)
            yield block


def _file(path: Path, dest: str) -> JobFile:
    size = path.stat().st_size
    h = hashlib.md5()
    for block in _read(path, size, 0):
        h.update(block)
    return JobFile(dest, size, partial(_read, path, size), md5=h.digest())


def _tree(root: Path) -> list[tuple[Path, str]]:
    """Regular files under root (root itself when it is one), with their paths relative to it; links are
    not followed, so nothing outside the output is read."""
    if root.is_file() and not root.is_symlink():
        return [(root, root.name)]
    if not root.is_dir():
        return []
    return sorted((p, p.relative_to(root).as_posix()) for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def job_files(name: str, job_dir: Path, plan: dict, outputs: list | None, logs: bool) -> list[JobFile]:
    declared = dict(plan.get("outputs") or {})
    wanted = sorted(declared) if outputs is None else outputs
    unknown = [o for o in wanted if o not in declared]
    if unknown:
        raise UsageError(f"job '{name}' has no output named {', '.join(unknown)}",
                         hint="its outputs: " + (", ".join(sorted(declared)) or "none"))
    files = [_file(p, output_path(o, rel)) for o in wanted for p, rel in _tree(Path(declared[o]))]
    if logs:
        files += [_file(p, log_path(f"{folder}/{rel}")) for folder in LOG_FOLDERS for p, rel in _tree(job_dir / folder)]
    return files
