"""`dtrain clean`: remove finished local jobs (or only their code snapshots) older than a given age.

Never touched: a job that is not finished (checked under the job's lock, after the lost-supervisor check,
so a Queued job whose supervisor is starting counts as running), any job of a retry chain that has not
finished (chain.py: an attempt runs or the next is due), the jobs of a chain one of whose attempts ended
less than the age ago (a chain goes as a whole), a job whose state is unreadable (its age and processes
are unknown), a job folder (or snapshot) that is a symlink (never followed; named in report.notes), and
$DTRAIN_HOME/datastores (shared by every job, like a real datastore) unless `datastores` is asked for: then
the folders there that only removed jobs wrote go too (clean_datastores.py). A whole job is first renamed to a
hidden name, so a reader sees the job or nothing, then deleted. `.staging-*` folders left by a submit
that was killed mid-copy go once they are an hour old. With `envs`, the job environments nothing needs go
too (clean_envs.py).
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DtrainError, UsageError
from ...timestamps import epoch
from ..base import is_terminal
from . import clean_datastores as ds
from .store import STATE, CorruptState, jobs_root, locked, read_state, tree_size
from .record import JobRecord

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
    notes: list = field(default_factory=list)        # what was left alone and why (a symlinked job folder)
    datastores: list = field(default_factory=list)   # clean_datastores.DatastoreFolder: removed with their jobs
    envs: list = field(default_factory=list)         # clean_envs.EnvFolder: job environments nothing needs


def _ended_at(state: JobRecord, job_dir: Path) -> float:
    ended = epoch(state.ended)
    return ended if ended is not None else (job_dir / STATE).stat().st_mtime



class _Chains:
    """Retry chains (chain.py) seen as wholes: a chain's jobs go together or not at all, so a chain is
    never left without its head (its name) or without an attempt it still needs."""

    def __init__(self, backend):
        from ...chain_view import ChainView

        self._view = ChainView(getattr(backend, "inner", backend), None)
        self._inner = self._view.inner
        self._seen: dict = {}

    def hold(self, info, now: float, older_than_s: float) -> str | None:
        """Why a chain's job must stay ("running": the chain has not finished; "young": an attempt of it
        ended less than the age ago), or None when it may go (or is no chain's)."""
        from ...chain import CHAIN_TAG

        chain = (info.tags or {}).get(CHAIN_TAG)
        if not chain:
            return None
        if chain not in self._seen:
            self._seen[chain] = self._judge(str(chain), now, older_than_s)
        return self._seen[chain]

    def _judge(self, chain: str, now: float, older_than_s: float) -> str | None:
        from ...chain import is_chain_head

        try:
            head = self._inner.status(chain)
        except DtrainError:
            return None                          # its head is gone: each attempt stands alone
        if not is_chain_head(head):
            return None
        view = self._view.view(head)             # looks only: never submits the next attempt
        if not view.terminal:                    # an attempt runs, or the next one is due (Retrying)
            return "running"
        ends = [epoch(a.get("ended")) for a in (view.chain or {}).get("attempts", [])]
        youngest = max((e for e in ends if e is not None), default=now)
        return "young" if now - youngest < older_than_s else None


def _clean_hidden(d: Path, now: float, report: CleanReport, dry_run: bool) -> None:
    """.trash-* (left by a clean that was killed) and stale .staging-* (a submit killed mid-copy)."""
    if d.is_symlink():
        if d.name.startswith(".trash-") and not dry_run:
            d.unlink()                           # the link only: never what it points at
        return
    if d.name.startswith(".trash-") and d.is_dir():
        if not dry_run:
            shutil.rmtree(d, ignore_errors=True)
    elif d.name.startswith(".staging-") and d.is_dir() and now - d.stat().st_mtime > STAGING_GRACE_S:
        report.removed.append(d.name)
        report.bytes_freed += tree_size(d)
        if not dry_run:
            shutil.rmtree(d, ignore_errors=True)


def _remove(root: Path, d: Path, older_than_s: float, now: float, report: CleanReport, *,
            dry_run: bool, snapshots_only: bool) -> None:
    """Remove a finished job (or its snapshot) that ended long enough ago, deciding under its lock."""
    trash = None
    with locked(d):
        try:
            state = read_state(d)
        except (OSError, CorruptState):
            return
        if not is_terminal(state.status) or now - _ended_at(state, d) < older_than_s:
            return
        target = d / "snapshot" if snapshots_only else d
        if target.is_symlink():
            report.notes.append(f"{d.name}: its snapshot is a symlink (to {os.readlink(target)}); left alone")
            return
        if not target.exists():
            return
        report.removed.append(d.name)
        report.bytes_freed += tree_size(target)
        if dry_run:
            return
        if snapshots_only:
            shutil.rmtree(target, ignore_errors=True)
            return
        trash = root / f".trash-{d.name}-{secrets.token_hex(4)}"
        os.rename(d, trash)
    shutil.rmtree(trash, ignore_errors=True)


def clean(backend, older_than_s: float, *, dry_run: bool = False, snapshots_only: bool = False,
          datastores: bool = False, envs: bool = False) -> CleanReport:
    if datastores and snapshots_only:
        raise UsageError("--datastores and --snapshots-only cannot be used together",
                         hint="--snapshots-only keeps every job, so no datastore folder is only a removed job's")
    report = CleanReport()
    root = jobs_root(backend.home)
    _clean_jobs(backend, root, older_than_s, report, dry_run, snapshots_only, datastores)
    if envs:                                     # after the jobs: a job removed now holds none
        _clean_envs(backend.home / "envs", root, older_than_s, report, dry_run)
    return report


def _clean_envs(envs: Path, root: Path, older_than_s: float, report: CleanReport, dry_run: bool) -> None:
    from . import clean_envs

    if not dry_run:
        clean_envs.clean_trash(envs)
    report.envs = clean_envs.sweep(envs, root, older_than_s, time.time(), dry_run, report.notes)
    report.bytes_freed += sum(f.bytes for f in report.envs)


def _clean_jobs(backend, root: Path, older_than_s: float, report: CleanReport, dry_run: bool,
                snapshots_only: bool, datastores: bool) -> None:
    if not root.is_dir():
        return
    # What each job uses is read before any goes (a removed job's plan goes with it).
    before = ds.scan(root, backend.home / "datastores") if datastores else {}
    now = time.time()
    chains = _Chains(backend)
    for d in sorted(root.iterdir()):
        if d.name.startswith("."):
            _clean_hidden(d, now, report, dry_run)
            continue
        if d.is_symlink():                       # never followed: what it points at is not ours
            report.notes.append(f"{d.name}: the job folder is a symlink (to {os.readlink(d)}); left alone")
            continue
        if not (d / STATE).is_file():
            continue
        try:
            info = backend.status(d.name)      # repairs a job whose supervisor is gone
        except DtrainError:
            continue
        if info.status == "Unreadable":
            report.unreadable.append(d.name)
            continue
        hold = chains.hold(info, now, older_than_s)
        if not info.terminal or hold == "running":
            report.kept_running.append(d.name)
            continue
        if hold is None:
            _remove(root, d, older_than_s, now, report, dry_run=dry_run, snapshots_only=snapshots_only)
    if datastores:
        _clean_datastores(backend.home, root, before, report, dry_run)


def _clean_datastores(home: Path, root: Path, before: dict, report: CleanReport, dry_run: bool) -> None:
    """The datastore folders of the removed jobs that no remaining job uses, judged after the jobs went
    (so a job submitted meanwhile counts as remaining)."""
    removed = [n for n in report.removed if not n.startswith(".")]
    after = ds.scan(root, home / "datastores", skip=set(report.removed))
    folders = ds.removable(before, removed, after, report.notes)
    report.datastores = ds.sweep(home, folders, dry_run, report.notes)
    report.bytes_freed += sum(f.bytes for f in report.datastores)
