"""Process bookkeeping on Linux: identity by (pid, start time), finding a job's processes, stopping them.

Every process of a local job carries DTRAIN_LOCAL_JOB=<token> in its environment (inherited by anything
it starts), so the job's processes can be found even after their parent died and they were reparented.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

TOKEN_VAR = "DTRAIN_LOCAL_JOB"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_libc = None


def _prctl(option: int, arg: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)


def set_subreaper() -> bool:
    """Orphaned descendants are reparented to this process instead of init (so it can find and reap them)."""
    try:
        return _prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    except OSError:
        return False


def child_preexec(parent_pid: int, deathsig: int = signal.SIGKILL):
    """preexec_fn for children: own process group, and die when the parent (the supervisor) dies."""

    def _pre():
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, int(deathsig))
        if os.getppid() != parent_pid:      # the parent died before prctl took effect
            os._exit(137)

    return _pre


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2:].split()
    return rest          # rest[0] = state (field 3), rest[19] = starttime (field 22)


def start_time(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[19]) if f and len(f) > 19 else None


def is_alive(pid: int | None, started: int | None = None) -> bool:
    """True when pid runs (not a zombie) and, when given, started at the recorded time (pid not reused)."""
    if not pid:
        return False
    f = _stat_fields(pid)
    if not f:
        return False
    if f[0] in ("Z", "X"):
        return False
    if started is not None and int(f[19]) != int(started):
        return False
    return True


def pgid_of(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[2]) if f and len(f) > 2 else None


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def job_pids(token: str, exclude: set[int] | None = None) -> list[int]:
    """Every live process whose environment carries this job's token."""
    needle = f"{TOKEN_VAR}={token}".encode()
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == me or (exclude and pid in exclude):
            continue
        f = _stat_fields(pid)
        if not f or f[0] in ("Z", "X"):
            continue
        if _environ_has(pid, needle):
            out.append(pid)
    return out


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def kill_job_processes(token: str, pgids=(), *, grace: float = 0.0, exclude: set[int] | None = None) -> int:
    """SIGTERM (when grace > 0) then SIGKILL to the job's process groups and every process with its token.

    Returns how many processes were still found at the end (0 = none left)."""
    exclude = set(exclude or ())
    mine = os.getpgrp()
    # Only groups the caller knows are the job's (its unreaped children) plus groups that hold a process
    # with the token: a bare recorded pgid may have been reused by now.
    groups = {g for g in pgids if g and g > 1 and g != mine}
    groups |= {g for g in (pgid_of(p) for p in job_pids(token, exclude)) if g and g > 1 and g != mine}
    if grace > 0:
        for g in groups:
            signal_group(g, signal.SIGTERM)
        for p in job_pids(token, exclude):
            signal_pid(p, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and job_pids(token, exclude):
            time.sleep(0.05)
    for _ in range(50):
        for g in groups:
            signal_group(g, signal.SIGKILL)
        left = job_pids(token, exclude)
        if not left:
            return 0
        for p in left:
            signal_pid(p, signal.SIGKILL)
        time.sleep(0.05)
    return len(job_pids(token, exclude))
