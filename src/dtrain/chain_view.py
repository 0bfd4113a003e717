"""A retry chain seen as one job (chain.py): ChainView shows a chain under its own name (status, logs, wait,
watch, list, cancel), following its latest attempt; reading never submits anything. ChainView.advance is the
explicit step a follower (follow.py) takes for a chain between attempts: decide, then submit the next attempt
when it is due. It prints nothing: what it has to say goes to a notify callable as Notices."""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from datetime import datetime
from typing import Iterator

from .backends.base import Backend, JobInfo, LogLine, Notice
from .chain import (CHAIN_TAG, RETRYING, Decision, Policy, attempt_name, attempt_plan, attempt_record, belongs, cause,
                    cause_pending, decide, is_chain_head, not_retried, reason)
from .chain_recipe import load_recipe, recipe_stopped, stop_recipe
from .errors import DtrainError, JobNotFound, UsageError
from .retry_causes import record_cause
from .status import JobStatus


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
            elif d.action == "retry" and cause_pending(attempts[-1], policy):   # never retried blind
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
