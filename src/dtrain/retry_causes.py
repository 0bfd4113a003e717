"""A retry chain records why each attempt ended: its top cause (`dtrain why`, dtrain.diagnose) in the
attempt's tag `dtrain.cause`, so that `--retry-on collective_timeout` can retry a collective timeout and
not a missing package, and `status -o json` lists each attempt's cause.

The follower records it (ChainView.advance), once per ended attempt, before it decides: the tags are the
chain's one home for its policy and history, visible from any machine. Recording never stops a chain: a
cause that cannot be read or written is left out, and the decision goes on without it.
"""
from __future__ import annotations

from .backends.base import Backend, JobInfo
from .errors import DtrainError

CAUSE_TAG = "dtrain.cause"
NONE_FOUND = "none"           # diagnosed, and no cause found: not diagnosed again


def top_cause(backend: Backend, info: JobInfo) -> str:
    from .diagnose import JobFacts, diagnose

    causes = diagnose(backend.rank_logs(info.name), first_rank=info.failure.rank if info.failure else None,
                      job=JobFacts.of(info))
    return causes[0].kind if causes else NONE_FOUND


def record_cause(backend: Backend, info: JobInfo) -> bool:
    """Tag an attempt that ended other than Completed with its top cause, unless it has one; whether it was
    tagged now."""
    if not info.terminal or info.status == "Completed" or CAUSE_TAG in (info.tags or {}):
        return False
    try:
        backend.update(info.name, tags={CAUSE_TAG: top_cause(backend, info)})
    except (DtrainError, OSError):
        return False
    return True
