"""The eviction drill: `dtrain submit --local --preempt-after DURATION`.

A low-priority (spot) node that Azure takes back gives the job's processes a notice (SIGTERM) and then
takes the node. The drill does that to a local job: DURATION after its processes start, the supervisor
gives every rank SIGTERM, SIGKILLs what is left after the job's grace period (DTRAIN_LOCAL_GRACE_S, as for
any stop), and ends the job as Azure ends a lost node: NotResponding, infrastructure (exit 5). A retry
chain (`--retries`) retries it, and the next attempt resumes from the chain's checkpoint folder; a
script's SIGTERM handler (save a checkpoint, exit) can be tested against the notice.

Only attempt 1 of a chain gets the drill (chain.attempt_plan), so the chain can finish. The supervisor
(supervisor.py) holds the hooks: the deadline, the reason "preempted", and the final state here.
"""
from __future__ import annotations

import time

REASON = "preempted"
STATUS = "NotResponding"       # what Azure reports for a node it lost; exit 5 (infrastructure), retried


def deadline(preempt_after_s: float | None, started: float) -> float | None:
    """When the drill preempts a job whose processes started at `started` (time.monotonic)."""
    return started + preempt_after_s if preempt_after_s else None


def due(at: float | None) -> str | None:
    """The supervisor's reason to stop, once the drill's time has come."""
    return REASON if at is not None and time.monotonic() >= at else None


def sooner(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines (either may be unset)."""
    return min(a, b) if a is not None and b is not None else (a if b is None else b)


def failure(preempt_after_s: float, grace_s: float, elapsed_s: float, job_dir) -> dict:
    """The final state's failure: the words `dtrain why` reads as a preemption (diagnose/causes.py)."""
    return {"message": f"preempted by the eviction drill (--preempt-after {preempt_after_s:g}s) after "
                       f"{elapsed_s:.0f} s: every rank got SIGTERM, what was left SIGKILL after {grace_s:g} s "
                       f"(what Azure does to a low-priority node); see {job_dir / 'system_logs' / 'supervisor.txt'}",
            "infrastructure": True, "preempted": True, "last_lines": [], "traceback": []}
