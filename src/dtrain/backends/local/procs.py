"""Process bookkeeping on Linux: identity by (pid, start time), finding a job's processes, stopping them.

A job's processes are found two ways, so that none escapes whatever the command's shape:
- the process tree: the watchdog and the supervisor are child subreapers, so anything a job starts
  (a compound command's children, a double-forked `setsid` daemon, an `env -i` grandchild) stays a
  descendant of them even after its parent died;
- the marker: every process of a local job carries DTRAIN_LOCAL_JOB=<token> in its environment
  (inherited by anything it starts that does not clear its environment), for the last-resort sweep
  done by another dtrain command when both the supervisor and the watchdog are gone.
A subtree marked as another job's (a job submitted from inside this one) is never ours to stop.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

TOKEN_VAR = "DTRAIN_LOCAL_JOB"
# Carried by a job's watchdog and supervisor (not TOKEN_VAR: a sweep by marker must never hit them).
OWNER_VAR = "DTRAIN_LOCAL_SUPERVISOR"
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


def set_pdeathsig(sig: int) -> bool:
    """This process gets sig when its parent dies."""
    try:
        return _prctl(PR_SET_PDEATHSIG, int(sig)) == 0
    except OSError:
        return False


def child_preexec(parent_pid: int, deathsig: int = signal.SIGKILL):
    """preexec_fn for children: own session (and process group), and die when the parent (the supervisor)
    dies."""

    def _pre():
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, int(deathsig))
        if os.getppid() != parent_pid:      # the parent died before prctl took effect
            os._exit(137)

    return _pre


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the third on (state, ppid, ...), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2:].split()
    return rest          # rest[0] = state (field 3), rest[19] = starttime (field 22)


def start_time(pid: int) -> int | None:
    f = stat_fields(pid)
    return int(f[19]) if f and len(f) > 19 else None


def is_alive(pid: int | None, started: int | None = None) -> bool:
    """True when pid runs (not a zombie) and, when given, started at the recorded time (pid not reused)."""
    if not pid:
        return False
    f = stat_fields(pid)
    if not f:
        return False
    if f[0] in ("Z", "X"):
        return False
    if started is not None and int(f[19]) != int(started):
        return False
    return True


def pgid_of(pid: int) -> int | None:
    f = stat_fields(pid)
    return int(f[2]) if f and len(f) > 2 else None


def _environ(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def _environ_has(pid: int, needle: bytes) -> bool:
    return needle in (_environ(pid) or ())


def _foreign(pid: int, token: str) -> bool:
    """True when pid is marked as another local job's process or supervisor (a job nested in ours)."""
    ours = {f"{TOKEN_VAR}={token}".encode(), f"{OWNER_VAR}={token}".encode()}
    for item in _environ(pid) or ():
        if item.startswith((TOKEN_VAR.encode() + b"=", OWNER_VAR.encode() + b"=")) and item not in ours:
            return True
    return False


def descendants(root: int, token: str | None = None) -> list[int]:
    """Live descendants of root (not root itself), from /proc's parent links. With token, the subtree of a
    process that belongs to another local job (marked with another token) is left out."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        f = stat_fields(int(entry))
        if f and len(f) > 1 and f[0] not in ("Z", "X"):
            children.setdefault(int(f[1]), []).append(int(entry))
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if token is not None and _foreign(pid, token):
            continue
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def reap_any() -> None:
    """Reap every exited child without blocking (a subreaper adopts the job's orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(root: int, token: str, *, reap: bool = False) -> int:
    """SIGKILL every descendant of root (except another job's subtree) until none is left; returns how
    many were killed. Several passes: a process may fork while its siblings are being killed."""
    killed: set[int] = set()
    for _ in range(100):
        left = descendants(root, token)
        if reap:
            reap_any()
        if not left:
            break
        for p in left:
            signal_pid(p, signal.SIGKILL)
            killed.add(p)
        time.sleep(0.02)
    if reap:
        reap_any()
    return len(killed)


def session_pids(sessions: dict[int, int | None]) -> list[int]:
    """Live processes in the given sessions ({sid: start time of its leader}). A session whose leader's pid
    now belongs to a process that started at another time is skipped: the kernel reuses a pid only once
    no process uses it as a session id any more, so such a session is not the job's."""
    valid = set()
    for sid, started in sessions.items():
        now = start_time(sid)
        if now is None or started is None or now == int(started):
            valid.add(int(sid))
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            f = stat_fields(int(entry))
            if f and len(f) > 3 and f[0] not in ("Z", "X") and int(f[3]) in valid:
                out.append(int(entry))
    return out


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
        f = stat_fields(pid)
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
