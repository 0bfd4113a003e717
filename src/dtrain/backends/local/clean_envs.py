"""`dtrain clean --envs`: the job environments under $DTRAIN_HOME/envs (jobenv.py) that nothing needs now.

A venv built from a job's conda file can hold gigabytes (torch alone is hundreds of MB), and every edit of
the pip part builds a new one, so they pile up. An environment goes when all of these hold:
- no unfinished job (running, queued, a submit still staging) names it in its plan;
- no job has used it for the age: its `ready` marker's time, which jobenv.ensure renews at every reuse;
- no build or reuse holds its lock now (checked without waiting, and the removal happens under that lock).
A finished job that stays keeps no environment alive: a resubmit builds it again. A half-built folder (no
`ready` marker, a killed build) goes once it is that old. The lock files stay: a lock file removed while
another process waits on it would let two builds of one hash run at once.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..base import is_terminal
from .jobenv import READY, _lock
from .store import PLAN, STATE, CorruptState, read_state, tree_size


@dataclass
class EnvFolder:
    path: str
    bytes: int
    last_used: float                # epoch seconds: the ready marker's time (the folder's for a half-built one)


def in_use(root: Path) -> set | None:
    """The environment folders unfinished jobs (and submits still staging) name in their plans; None when
    one such job's plan cannot be read (then nothing can be judged unused)."""
    used: set = set()
    if not root.is_dir():
        return used
    for d in root.iterdir():
        if d.name.startswith(".trash-") or d.is_symlink():
            continue
        staging = d.name.startswith(".staging-")
        if not staging:
            if not (d / STATE).is_file():
                continue
            try:
                if is_terminal(read_state(d).status):
                    continue
            except (OSError, CorruptState):
                pass                            # unreadable: as if it ran
        try:
            plan = json.loads((d / PLAN).read_text(encoding="utf-8"))
        except FileNotFoundError:
            if staging:
                continue                        # not written yet: its submit renews the marker it reuses
            return None
        except (OSError, ValueError):
            return None
        path = ((plan or {}).get("job_env") or {}).get("path")
        if path:
            used.add(os.path.realpath(path))
    return used


def sweep(envs: Path, root: Path, older_than_s: float, now: float, dry_run: bool, notes: list) -> list:
    """Remove (or with dry_run, list) the environments nothing needs; EnvFolder for each."""
    if not envs.is_dir():
        return []
    used = in_use(root)
    if used is None:
        notes.append("job environments: an unfinished job's plan cannot be read, so none was removed")
        return []
    gone = []
    for d in sorted(envs.iterdir()):
        if d.name.startswith(".") or d.is_symlink() or not d.is_dir() or os.path.realpath(d) in used:
            continue
        folder = _remove_if_unused(envs, d, older_than_s, now, dry_run)
        if folder:
            gone.append(folder)
    return gone


def _last_used(d: Path) -> float:
    ready = d / READY
    return (ready if ready.is_file() else d).stat().st_mtime


def _remove_if_unused(envs: Path, d: Path, older_than_s: float, now: float, dry_run: bool) -> EnvFolder | None:
    try:
        with _lock(envs / f"{d.name}.lock", wait=False):
            folder, trash = _take_out(envs, d, older_than_s, now, dry_run)
    except BlockingIOError:
        return None                             # being built or reused right now
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    return folder


def _take_out(envs: Path, d: Path, older_than_s: float, now: float, dry_run: bool):
    """Under the environment's lock: (the folder, its trash name) when unused for the age, renamed aside
    unless dry_run (a reuse sees it whole or not at all); (None, None) when it stays."""
    try:
        last = _last_used(d)
    except FileNotFoundError:
        return None, None
    if now - last < older_than_s:
        return None, None
    folder = EnvFolder(str(d), tree_size(d), last)
    if dry_run:
        return folder, None
    trash = envs / f".trash-{d.name}-{secrets.token_hex(4)}"
    os.rename(d, trash)
    return folder, trash


def clean_trash(envs: Path) -> None:
    """.trash-* left by a clean that was killed mid-removal."""
    if envs.is_dir():
        for d in envs.iterdir():
            if d.name.startswith(".trash-") and d.is_dir() and not d.is_symlink():
                shutil.rmtree(d, ignore_errors=True)
