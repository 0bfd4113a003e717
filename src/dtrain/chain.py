"""Retry chains: `dtrain submit SPEC --retries N [--retry-on infrastructure|failed|CAUSE,...]`.

A chain is a job (attempt 1, named after the chain) and the attempts that retried it, each a job of its
own named NAME-r1, NAME-r2, ... and tagged with the chain, its attempt number and the retry policy. The
chain's state is those jobs and their tags, so whoever can see the jobs can see the chain (the local
store, or the Azure ML workspace from any machine).

What the next step is comes from the attempts alone (decide): an infrastructure outcome (NotResponding:
a lost node, a lost local supervisor) is always retried; Failed only with retry_on "failed", or when the
attempt's top cause (`dtrain why`, recorded in its tag dtrain.cause: retry_causes.py) is one retry_on names;
Canceled and timed out never; at most N more attempts, each after a back-off counted from the end of the last.
Attempt names are fixed, and both backends follow a job that already exists under a name with the same
spec, so submitting attempt k twice (two followers, or a re-run after a CI runner died) starts it once.

Attempts resume from one checkpoint folder: an output path with `${{name}}` in it is written with the
chain's name instead (attempt_spec), so every attempt reads and writes the same datastore folder.

The policy has one home, the jobs' tags (a tag that does not parse makes the job no chain). The recipe
($DTRAIN_HOME/chains/NAME.json) holds only what tags cannot: the spec and the --input paths.

This module is the policy and its decisions, pure functions of the attempts; chain_recipe.py stores the
recipe; chain_view.py (ChainView) shows a chain as one job and takes the step that submits the next attempt.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass

from .backends.base import JobInfo, SubmitOptions
from .backends.names import MAX_NAME
from .errors import DtrainError, UsageError
from .retry_causes import CAUSE_TAG
from .status import JobStatus, exit_code
from .timestamps import epoch

CHAIN_TAG = "dtrain.chain"
ATTEMPT_TAG = "dtrain.attempt"
RETRIES_TAG = "dtrain.retries"
RETRY_ON_TAG = "dtrain.retry_on"
RETRY_ON = ("infrastructure", "failed")          # or cause kinds (dtrain why), comma-separated
RETRYING = JobStatus.RETRYING   # the chain's status between an attempt's end and the next attempt's submit
BACKOFF_VAR = "DTRAIN_RETRY_BACKOFF_S"
BACKOFF_DEFAULT_S = 30.0
BACKOFF_CAP_S = 600.0
# NotResponding: Azure's status for a run whose node stopped answering (and the local backend's for a lost
# supervisor). Paused is not here: the REST spec says a job is paused by users, so it is not retried.
INFRA_STATUSES = ("NotResponding",)


# --- names, tags, policy (pure) ------------------------------------------------------------------

def attempt_name(chain: str, k: int) -> str:
    """Attempt 1 is the chain's own name; attempt k > 1 is NAME-r(k-1)."""
    return chain if k <= 1 else f"{chain}-r{k - 1}"


def check_chain_name(chain: str, retries: int) -> None:
    """Every attempt's name must be a valid job name: the longest one, NAME-rN, within 255 characters."""
    last = attempt_name(chain, retries + 1)
    if len(last) > MAX_NAME:
        raise UsageError(f"the name '{chain[:40]}...' is too long for a chain of {retries + 1} attempts "
                         f"({last[-12:]} would make {len(last)} characters; at most {MAX_NAME})",
                         hint="give a shorter --name")


@dataclass(frozen=True)
class Policy:
    retries: int                 # attempts after the first, at most
    retry_on: str = "infrastructure"

    def tags(self, chain: str, k: int) -> dict:
        return {CHAIN_TAG: chain, ATTEMPT_TAG: str(k), RETRIES_TAG: str(self.retries), RETRY_ON_TAG: self.retry_on}

    @classmethod
    def from_tags(cls, tags: dict) -> "Policy | None":
        """The policy a chain's jobs carry, or None where the tags hold none or one that does not parse
        (such a job is no chain: it is shown and followed as the job it is)."""
        try:
            retries = int(str(tags.get(RETRIES_TAG)))
        except ValueError:
            return None
        on = str(tags.get(RETRY_ON_TAG) or "infrastructure")
        return cls(retries, on) if retries > 0 and valid_retry_on(on) else None

    @property
    def causes(self) -> frozenset:
        """The cause kinds whose Failed attempts are retried (none for infrastructure / failed)."""
        return frozenset() if self.retry_on in RETRY_ON else frozenset(self.retry_on.split(","))


def valid_retry_on(on: str) -> bool:
    from .diagnose.causes import BY_KIND

    return on in RETRY_ON or (bool(on) and all(k in BY_KIND for k in on.split(",")))


def check_policy(retries: int | None, retry_on: str | None) -> Policy | None:
    """The --retries / --retry-on flags as a Policy (None without --retries); usage errors for values
    that make no sense and for --retry-on without --retries (it would do nothing)."""
    if retry_on is not None:
        retry_on = ",".join(k.strip() for k in retry_on.split(","))
    if retry_on is not None and not valid_retry_on(retry_on):
        from .diagnose.causes import BY_KIND

        raise UsageError(f"--retry-on must be one of {', '.join(RETRY_ON)}, or causes `dtrain why` names "
                         f"(comma-separated), not '{retry_on}'",
                         hint="infrastructure: lost nodes and preemption (NotResponding); failed: also Failed attempts; "
                              f"causes: {', '.join(BY_KIND)}")
    if retries is None:
        if retry_on is not None:
            raise UsageError("--retry-on only applies with --retries", hint="add --retries N, or drop --retry-on")
        return None
    if retries < 1:
        raise UsageError(f"--retries must be at least 1, not {retries}", hint="drop --retries for a single attempt")
    return Policy(retries, retry_on or "infrastructure")


def is_chain_head(info: JobInfo) -> bool:
    """The first attempt of a chain (its name is the chain's): the job a chain is shown through."""
    tags = info.tags or {}
    return tags.get(CHAIN_TAG) == info.name and str(tags.get(ATTEMPT_TAG)) == "1" and Policy.from_tags(tags) is not None


def belongs(info: JobInfo, chain: str, k: int) -> bool:
    tags = info.tags or {}
    return tags.get(CHAIN_TAG) == chain and str(tags.get(ATTEMPT_TAG)) == str(k)


def attempt_spec(spec, chain: str):
    """The spec an attempt runs: output paths with `${{name}}` (or `{name}`) get the chain's name, which Azure
    would expand to each attempt's own name, so that all attempts share one checkpoint folder. Attempt 1's
    own name is the chain's, so its folder is the same either way."""
    outputs = spec.data.get("outputs") or {}
    if not any(isinstance(o, dict) and "name}" in str(o.get("path") or "") for o in outputs.values()):
        return spec
    data = copy.deepcopy(spec.data)
    for o in data["outputs"].values():
        if isinstance(o, dict) and isinstance(o.get("path"), str):
            o["path"] = o["path"].replace("${{name}}", chain).replace("{name}", chain)
    return dataclasses.replace(spec, data=data)


def refused_rerun(backend, chain: str, exc: DtrainError) -> DtrainError:
    """The error for `submit --retries` under the name of a chain whose attempt 1 differs from this submit
    (another spec, --retries or --retry-on): the backend's refusal, saying that the chain goes on unchanged.
    Any other refusal is returned as it is."""
    try:
        head = backend.status(chain)
    except DtrainError:
        return exc
    if not is_chain_head(head):
        return exc
    p = Policy.from_tags(head.tags)
    assert p is not None                     # is_chain_head
    return UsageError(f"{exc.message}: it is attempt 1 of the retry chain '{chain}' (--retries {p.retries} "
                      f"--retry-on {p.retry_on}), which goes on as it was started",
                      hint=f"`dtrain wait {chain}` follows that chain; a new chain needs a new --name")


# --- outcomes and the decision (pure) ------------------------------------------------------------

def outcome(info: JobInfo) -> str:
    """completed, failed, canceled, timeout, infrastructure, paused or lost: what an ended attempt came to."""
    if info.timed_out:
        return "timeout"
    return {"Completed": "completed", "Failed": "failed", "Canceled": "canceled", "NotResponding": "infrastructure",
            "Paused": "paused"}.get(info.status, "lost")


def reason(info: JobInfo) -> str | None:
    if info.failure and info.failure.message:
        return info.failure.message
    if info.timed_out:
        return "limits.timeout"
    return None if info.status == "Completed" else info.status


def cause(info: JobInfo) -> str | None:
    """An ended attempt's top cause, as its follower recorded it (None before, or where none was found)."""
    return (info.tags or {}).get(CAUSE_TAG) or None


def retryable(info: JobInfo, policy: Policy) -> bool:
    o = outcome(info)
    return o == "infrastructure" or (o == "failed" and (policy.retry_on == "failed" or cause(info) in policy.causes))


def cause_pending(info: JobInfo, policy: Policy) -> bool:
    """A Failed attempt of a chain that retries by cause, whose cause is not recorded yet: the chain waits
    (Retrying) for its follower to record it (ChainView.advance), then decides."""
    return bool(policy.causes) and outcome(info) == "failed" and cause(info) is None


def backoff_s(k: int, base: float | None = None) -> float:
    """Seconds to wait before attempt k (k >= 2), counted from the end of attempt k-1: base, 2 x base, ...,
    at most BACKOFF_CAP_S. base: DTRAIN_RETRY_BACKOFF_S (default 30)."""
    if base is None:
        from .settings import current

        base = current().number(BACKOFF_VAR)
    return min(BACKOFF_CAP_S, max(0.0, base) * (2 ** max(0, k - 2)))




@dataclass(frozen=True)
class Decision:
    action: str                  # "running" (the latest attempt has not ended), "retry", "done" or "stopped"
    next_attempt: int | None = None
    due_at: float | None = None  # epoch seconds: when the next attempt may be submitted


def decide(attempts: list, policy: Policy, now: float | None = None) -> Decision:
    """What comes after these attempts (in order, the first is the chain's own job)."""
    last = attempts[-1]
    if not last.terminal:
        return Decision("running")
    if (retryable(last, policy) or cause_pending(last, policy)) and len(attempts) < policy.retries + 1:
        k = len(attempts) + 1
        ended = epoch(last.ended) or (now if now is not None else time.time())
        return Decision("retry", k, ended + backoff_s(k))
    return Decision("done")


def attempt_label(chain: dict, k: int | None = None) -> str:
    """'attempt 2/3': attempt k (default: the chain's latest) of the most a chain (JobInfo.chain) may make;
    a chain that ended before its last attempt without completing says it was not retried."""
    label = f"attempt {chain['attempt'] if k is None else k}/{chain['retries'] + 1}"
    return label + (", not retried" if k is None and chain.get("not_retried") else "")


def not_retried(last: JobInfo, policy: Policy, attempts: int) -> str | None:
    """Why a chain that ended before its last attempt was not retried (None: it completed, or used every
    attempt, or has not ended)."""
    if not last.terminal or last.status == JobStatus.COMPLETED or attempts >= policy.retries + 1:
        return None
    o = outcome(last)
    if o == "failed" and policy.causes and cause(last) is None:
        return "its cause could not be recorded in its tags (dtrain.cause), and it is retried only by cause"
    if o == "failed" and policy.causes:
        return f"its cause, {cause(last)}, is not one --retry-on names ({policy.retry_on}; docs/retries.md)"
    if o == "failed":
        return "a Failed attempt is retried only with --retry-on failed (docs/retries.md)"
    if o == "timeout":
        return "an attempt that hit limits.timeout is never retried"
    if o == "canceled":
        return "a Canceled attempt is never retried"
    return None if retryable(last, policy) else f"{last.status} is not retried"


def attempt_record(info: JobInfo, k: int, successor: bool) -> dict:
    """One attempt as `status -o json` lists it. An attempt that was retried and now reads Canceled was
    NotResponding on Azure and canceled by dtrain before the next attempt (a NotResponding run can come
    back, the REST spec says, and two attempts must not write one checkpoint folder); Canceled attempts
    themselves are never retried."""
    o, why = outcome(info), reason(info)
    if successor and info.status == "Canceled":
        o, why = "infrastructure", "NotResponding; canceled by dtrain before the next attempt so that it cannot come back"
    return {"attempt": k, "name": info.name, "status": info.status, "outcome": o if info.terminal else None,
            "reason": why if info.terminal else None, "cause": cause(info) if info.terminal else None,
            "exit_code": int(exit_code(info)) if info.terminal else None,
            "created": info.created, "started": info.started, "ended": info.ended, "url": info.url}


def attempt_plan(backend, spec, chain: str, k: int, policy: Policy, *, input_paths: dict,
                 preempt_after_s: float | None = None):
    """The plan of attempt k on `backend` (the chain's): a pure function of the spec, the chain and k, so any
    follower builds the same plan, and submitting it again follows the job that exists. preempt_after_s: the
    local eviction drill, for attempt 1 only (so that a drilled chain can complete)."""
    opts = SubmitOptions(name=attempt_name(chain, k), tags=policy.tags(chain, k), input_paths=dict(input_paths or {}),
                         preempt_after_s=preempt_after_s if k == 1 else None)
    return backend.plan(attempt_spec(spec, chain), opts)
