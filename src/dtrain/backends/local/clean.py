"""`dtrain clean`: remove finished local jobs (or only their code snapshots) older than a given age.

Never touched: a job that is not finished (checked under the job's lock, after the lost-supervisor check,
so a Queued job whose supervisor is starting counts as running), a job whose state is unreadable (its
age and processes are unknown), and $DTRAIN_HOME/datastores (shared by every job, like a real
datastore). A whole job is first renamed to a hidden name, so a reader sees the job or nothing, then
deleted. `.staging-*` folders left by a submit that was killed mid-copy go once they are an hour old.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ...errors import DtrainError, UsageError
from ..base import is_terminal
from .store import STATE, CorruptState, jobs_root, locked, read_state

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
STAGING_GRACE_S = 3600


def parse_age(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w' (or plain seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not m:
        raise UsageError(f"--older-than must be an age such as 7d, 12h, 30m or 90s, not '{text}'")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


@dataclass
class CleanReport:
    removed: list = field(default_factory=list)      # job names (or staging folders) removed
    bytes_freed: int = 0
    kept_running: list = field(default_factory=list)
    unreadable: list = field(default_factory=list)


def _size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _ended_at(state: dict, job_dir: Path) -> float:
    try:
        return datetime.fromisoformat(state["ended"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return (job_dir / STATE).stat().st_mtime


def clean(backend, older_than_s: float, *, dry_run: bool = False, snapshots_only: bool = False) -> CleanReport:
    report = CleanReport()
    root = jobs_root(backend.home)
    if not root.is_dir():
        return report
    now = time.time()
    for d in sorted(root.iterdir()):
        if d.name.startswith(".trash-") and d.is_dir():   # left by a clean that was killed
            if not dry_run:
                shutil.rmtree(d, ignore_errors=True)
            continue
        if d.name.startswith(".staging-") and d.is_dir():
            if now - d.stat().st_mtime > STAGING_GRACE_S:
                report.removed.append(d.name)
                report.bytes_freed += _size(d)
                if not dry_run:
                    shutil.rmtree(d, ignore_errors=True)
            continue
        if d.name.startswith(".") or not (d / STATE).is_file():
            continue
        try:
            info = backend.status(d.name)      # repairs a job whose supervisor is gone
        except DtrainError:
            continue
        if info.status == "Unreadable":
            report.unreadable.append(d.name)
            continue
        if not info.terminal:
            report.kept_running.append(d.name)
            continue
        with locked(d):
            try:
                state = read_state(d)
            except (OSError, CorruptState):
                continue
            if not is_terminal(state["status"]) or now - _ended_at(state, d) < older_than_s:
                continue
            target = d / "snapshot" if snapshots_only else d
            if not target.exists():
                continue
            report.removed.append(d.name)
            report.bytes_freed += _size(target)
            if dry_run:
                continue
            if snapshots_only:
                shutil.rmtree(target, ignore_errors=True)
                continue
            trash = root / f".trash-{d.name}-{secrets.token_hex(4)}"
            os.rename(d, trash)
        shutil.rmtree(trash, ignore_errors=True)
    return report
