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

ChainView shows a chain as one job named after the chain (status, logs, wait, watch, list, cancel),
following its latest attempt; reading never submits anything. ChainView.advance is the explicit step a
follower (follow.py) takes for a chain between attempts: decide, then submit the next attempt when it is
due. It prints nothing: what it has to say goes to a notify callable as Notices.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterator

from .backends.base import Backend, JobInfo, LogLine, Notice, SubmitOptions
from .backends.names import MAX_NAME
from .errors import DtrainError, JobNotFound, UsageError
from .retry_causes import CAUSE_TAG, record_cause
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


def _cause_pending(info: JobInfo, policy: Policy) -> bool:
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
    if (retryable(last, policy) or _cause_pending(last, policy)) and len(attempts) < policy.retries + 1:
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


# --- the recipe: what a follower needs to submit the next attempt ---------------------------------

def _recipes() -> Path:
    from .settings import current

    return current().home / "chains"


def save_recipe(chain: str, spec, input_paths: dict, local: bool) -> None:
    """$DTRAIN_HOME/chains/<chain>.json: the validated spec (after --set), so that `dtrain wait CHAIN` in any
    terminal of this machine can submit the next attempt. Written atomically; no secret (the spec is a file
    here already). Another machine follows the chain through the jobs' tags, and re-running the same
    `submit --retries` there drives it."""
    doc = {"chain": chain, "local": local, "input_paths": dict(input_paths or {}),
           "spec": {"data": spec.data, "base_dir": str(spec.base_dir),
                    "source": str(spec.source.resolve()) if spec.source is not None else None}}
    path = _recipes() / f"{chain}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True, default=str)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        raise _unstorable(path, exc) from None


def check_recipe_storable(chain: str) -> None:
    """Before attempt 1 is submitted: a chain whose recipe cannot be stored would retry nothing (no
    follower could submit attempt 2), so it is refused (exit 6) while nothing has been sent."""
    folder = _recipes()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{chain}.probe.", dir=str(folder))
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise _unstorable(folder / f"{chain}.json", exc) from None


def _unstorable(path: Path, exc: OSError):
    from .errors import ConfigError

    return ConfigError(f"cannot store the recipe of chain {path.stem} at {path} ({exc.strerror or exc}); "
                       "without it no attempt after the first could be submitted",
                       hint="make $DTRAIN_HOME/chains writable (or set DTRAIN_HOME), or submit without --retries")


def stop_recipe(chain: str) -> bool:
    """Mark the chain stopped (`dtrain cancel` between attempts): no follower on this machine submits another
    attempt. False when this machine has no recipe for it."""
    path = _recipes() / f"{chain}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            return False
        doc["stopped"] = True
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, sort_keys=True, default=str)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError):
        return False


def recipe_stopped(chain: str) -> bool:
    try:
        doc = json.loads((_recipes() / f"{chain}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and bool(doc.get("stopped"))


def load_recipe(chain: str):
    """(spec, input_paths) from the recipe, or None when this machine has none."""
    from .spec.model import JobSpec

    try:
        doc = json.loads((_recipes() / f"{chain}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    s = doc.get("spec") if isinstance(doc, dict) else None
    inputs = doc.get("input_paths") or {} if isinstance(doc, dict) else None
    # a recipe of another shape (damaged, hand-edited) is no recipe, never a crash
    if not (isinstance(s, dict) and isinstance(s.get("data"), dict) and s["data"] and isinstance(s.get("base_dir"), str)
            and isinstance(s.get("source") or "", str) and isinstance(inputs, dict)):
        return None
    spec = JobSpec(data=s["data"], base_dir=Path(s["base_dir"]), source=Path(s["source"]) if s.get("source") else None)
    return spec, {str(k): str(v) for k, v in inputs.items()}


def attempt_plan(backend, spec, chain: str, k: int, policy: Policy, *, input_paths: dict,
                 preempt_after_s: float | None = None):
    """The plan of attempt k on `backend` (the chain's): a pure function of the spec, the chain and k, so any
    follower builds the same plan, and submitting it again follows the job that exists. preempt_after_s: the
    local eviction drill, for attempt 1 only (so that a drilled chain can complete)."""
    opts = SubmitOptions(name=attempt_name(chain, k), tags=policy.tags(chain, k), input_paths=dict(input_paths or {}),
                         preempt_after_s=preempt_after_s if k == 1 else None)
    return backend.plan(attempt_spec(spec, chain), opts)


# --- a chain seen as one job ---------------------------------------------------------------------

class ChainView(Backend):
    """A backend seen through retry chains: a chain's name shows the chain (latest attempt, every attempt
    listed); any other name passes through unchanged, at no extra cost. Reading never submits: advance()
    is the step that does, taken by a follower."""

    def __init__(self, inner: Backend, notify=None):
        self.inner = inner
        self.notify = notify
        self.name = inner.name
        self.poll_cap_s = inner.poll_cap_s
        self._lock = threading.Lock()
        self._told: set = set()

    # --- the view ----------------------------------------------------------------------------
    def _tell(self, key, text: str) -> None:
        if key in self._told:
            return
        self._told.add(key)
        if self.notify is not None:
            self.notify(Notice(text))

    def attempts(self, head: JobInfo, policy: Policy) -> list:
        """Every attempt that exists, in order: NAME, NAME-r1, ... while each exists and carries the chain's tags."""
        found = [head]
        for k in range(2, policy.retries + 2):
            try:
                info = self.inner.status(attempt_name(head.name, k))
            except JobNotFound:
                break
            if not belongs(info, head.name, k):
                break
            found.append(info)
        return found

    def _state(self, head: JobInfo):
        """(policy, attempts, decision, blocked) of the chain `head` is attempt 1 of."""
        policy = Policy.from_tags(head.tags)
        assert policy is not None            # callers check is_chain_head
        attempts = self.attempts(head, policy)
        d = decide(attempts, policy)
        blocked = None
        if d.action == "retry" and recipe_stopped(head.name):
            d, blocked = Decision("stopped"), f"stopped by `dtrain cancel {head.name}` before attempt {d.next_attempt}"
        return policy, attempts, d, blocked

    def view(self, head: JobInfo) -> JobInfo:
        if not is_chain_head(head):
            return head
        return _chain_info(head.name, *self._state(head))

    def advance(self, name: str, submit) -> JobInfo:
        """The follower's step for a chain: decide from its attempts and, when the next attempt is due,
        submit it with submit(plan, backend) (the runner's, which records where it went). Returns the
        chain as it is after that step; a name that is no chain is its status."""
        with self._lock:
            head = self.inner.status(name)
            if not is_chain_head(head):
                return head
            policy, attempts, d, blocked = self._state(head)
            if record_cause(self.inner, attempts[-1]):    # tagged now: decide again, with its cause
                policy, attempts, d, blocked = self._state(self.inner.status(name))
            elif d.action == "retry" and _cause_pending(attempts[-1], policy):   # never retried blind
                d, blocked = Decision("done"), "its cause could not be recorded in its tags (dtrain.cause)"
            if d.action == "retry":
                attempts, d, blocked = self._next_attempt(name, attempts, policy, d, submit)
            return _chain_info(name, policy, attempts, d, blocked)

    def _next_attempt(self, chain: str, attempts: list, policy: Policy, d: Decision, submit):
        last = attempts[-1]
        ended = f"{chain}: attempt {len(attempts)} ({last.name}) ended {last.status}" + (
            f" ({reason(last)})" if reason(last) not in (None, last.status) else "") + (
            f", cause {cause(last)}" if cause(last) else "")
        wait = (d.due_at or 0) - time.time()
        if wait > 0:
            self._tell(("wait", d.next_attempt), f"{ended}; attempt {d.next_attempt} of {policy.retries + 1} in {wait:.0f} s")
            return attempts, d, None
        recipe = load_recipe(chain)
        if recipe is None:
            why = (f"this machine has no recipe for chain {chain} ($DTRAIN_HOME/chains/{chain}.json); run the same "
                   f"`dtrain submit SPEC --name {chain} --retries {policy.retries}` to go on")
            self._tell(("blocked", d.next_attempt), f"{chain}: attempt {d.next_attempt} is due, but {why}")
            return attempts, Decision("done"), why
        spec, input_paths = recipe
        if last.status == JobStatus.NOT_RESPONDING:
            # Azure's REST spec: a NotResponding run can go back to any earlier status. Stop it before the next
            # attempt, so that two attempts never write the same checkpoint folder (a local one is over already).
            with contextlib.suppress(DtrainError):
                self.inner.stop(last.name)
        k = d.next_attempt or len(attempts) + 1
        info = submit(attempt_plan(self.inner, spec, chain, k, policy, input_paths=input_paths), self.inner)
        self._tell(("submitted", d.next_attempt),
                   f"{ended}; attempt {d.next_attempt} of {policy.retries + 1} submitted: {info.name}")
        attempts = attempts + [info]
        return attempts, decide(attempts, policy), None

    def latest(self, name: str) -> str:
        """The name of the job `name` stands for now: the latest attempt of a chain, else `name`."""
        head = self.inner.status(name)
        policy = Policy.from_tags(head.tags)
        if not is_chain_head(head) or policy is None:
            return name
        return self.attempts(head, policy)[-1].name

    # --- the Backend protocol ------------------------------------------------------------------
    def plan(self, spec, options):
        return self.inner.plan(spec, options)

    def submit(self, plan):
        return self.inner.submit(plan)

    def status(self, name: str) -> JobInfo:
        return self.view(self.inner.status(name))

    def knows(self, name: str) -> bool:
        return self.inner.knows(name)

    def stop(self, name: str) -> None:
        self.inner.stop(name)

    def where(self) -> dict | None:
        return self.inner.where()

    def preflight(self, plan) -> list[str]:
        return self.inner.preflight(plan)

    def image_build(self, plan) -> str | None:
        return self.inner.image_build(plan)

    def read_environment(self, ref: str) -> dict | None:
        return self.inner.read_environment(ref)

    def cluster(self, name: str) -> tuple[str, str] | None:
        return self.inner.cluster(name)

    def cancel(self, name: str) -> JobInfo:
        """Cancel a chain's latest attempt; a Canceled attempt is never retried, so the chain ends there."""
        head = self.inner.status(name)
        policy = Policy.from_tags(head.tags)
        if not is_chain_head(head) or policy is None:
            self.inner.cancel(name)
            return self.status(name)
        latest = self.attempts(head, policy)[-1]
        if not latest.terminal:
            self.inner.cancel(latest.name)
        elif not stop_recipe(name):           # between attempts: nothing runs; no next attempt from here on
            raise UsageError(f"chain {name} is between attempts, and this machine has no recipe for it",
                             hint="stop the `dtrain wait` / `submit --wait` that follows it, where it runs")
        return self.status(name)

    def list(self, *, experiment=None, tags=None, limit=None, names=None, archived: str = "hide") -> list:
        """A chain's attempts fold into one row, its own name's (when its first attempt is listed).
        archived: "hide" (the backend's list), "all" or "only" (its list_archived)."""
        if archived == "hide":
            infos = self.inner.list(experiment=experiment, tags=tags, limit=limit, names=names)
        else:
            infos = self.inner.list_archived(only=archived == "only", experiment=experiment, tags=tags, limit=limit)
        heads = {i.name for i in infos if is_chain_head(i)}
        out = []
        for i in infos:
            chain = (i.tags or {}).get(CHAIN_TAG)
            if chain in heads and chain != i.name and not names:
                continue                      # shown in its chain's row
            out.append(self.view(i) if i.name in heads else i)
        return out

    def logs(self, name: str, *, follow: bool = False, rank: int | None = None) -> Iterator[LogLine]:
        """The latest attempt's lines; with follow, each next attempt's as it starts, until the chain ends."""
        head = self.inner.status(name)
        if not is_chain_head(head):
            return self.inner.logs(name, follow=follow, rank=rank)
        if not follow:
            return self.inner.logs(self.latest(name), follow=False, rank=rank)
        return self._follow_logs(name, rank)

    def rank_logs(self, name: str):
        """A chain's latest attempt's rank logs (the attempt whose failure ended it)."""
        head = self.inner.status(name)
        return self.inner.rank_logs(self.latest(name) if is_chain_head(head) else name)

    def _follow_logs(self, name: str, rank):
        shown: set = set()
        poll = 0.2
        while True:
            info = self.status(name)
            current = info.chain["latest"] if info.chain else name
            if current not in shown:
                shown.add(current)
                yield from self.inner.logs(current, follow=True, rank=rank)
                continue
            if info.terminal:
                return
            time.sleep(poll)
            poll = min(self.poll_cap_s, poll * 1.5)

    def metrics(self, name: str, *, keys=None):
        return self.inner.metrics(self.latest(name), keys=keys)

    def metrics_reader(self, name: str, *, keys=None):
        return self.inner.metrics_reader(self.latest(name), keys=keys)

    def latest_metrics(self, jobs) -> dict:
        """Each chain's row reads its latest attempt's metrics, under the chain's name."""
        alias = {}
        actual = []
        for j in jobs:
            latest = (j.chain or {}).get("latest")
            if latest:
                alias[latest] = j.name
                actual.append(dataclasses.replace(j, name=latest))
            else:
                actual.append(j)
        got = self.inner.latest_metrics(actual)
        return {alias.get(k, k): v for k, v in got.items()}


    def sysmetrics(self, name: str):
        return self.inner.sysmetrics(self.latest(name))

    def latest_sysmetrics(self, jobs) -> dict:
        """As latest_metrics: a chain's row shows its latest attempt's."""
        alias = {(j.chain or {}).get("latest"): j.name for j in jobs if (j.chain or {}).get("latest")}
        actual = [dataclasses.replace(j, name=(j.chain or {}).get("latest") or j.name) for j in jobs]
        got = self.inner.latest_sysmetrics(actual)
        return {alias.get(k, k): v for k, v in got.items()}


def _chain_info(chain: str, policy: Policy, attempts: list, d: Decision, blocked: str | None) -> JobInfo:
    """The chain as one job: its latest attempt under the chain's name, Retrying between attempts, with
    every attempt and what comes next (JobInfo.chain)."""
    last = attempts[-1]
    info = dataclasses.replace(last, name=chain, tags=dict(attempts[0].tags))
    if d.action == "retry":
        info.status, info.failure, info.timed_out, info.ended = RETRYING, None, False, None
    elif d.action == "stopped":              # canceled between attempts: the chain was canceled (exit 3)
        info.status, info.timed_out = JobStatus.CANCELED, False
    records = [attempt_record(a, i + 1, i + 1 < len(attempts)) for i, a in enumerate(attempts)]
    info.chain = {"name": chain, "retries": policy.retries, "retry_on": policy.retry_on, "attempt": len(attempts),
                  "latest": last.name, "attempts": records,
                  "next": ({"attempt": d.next_attempt, "name": attempt_name(chain, d.next_attempt or 0),
                            "due_at": datetime.fromtimestamp(d.due_at or time.time()).astimezone().isoformat(
                                timespec="seconds")} if d.action == "retry" else None),
                  "blocked": blocked,
                  "not_retried": (not_retried(last, policy, len(attempts)) or blocked) if d.action != "retry" else None}
    return info
