"""A fake backend registered the real way (backends.register_backend), for tests of the runner, the
follower, chains, grids and the CLI in-process. It holds jobs in memory; each job moves through a script
of statuses, one step per status read. It proves how dtrain drives a backend, not how a backend works:
the real ones are tested end to end (local processes, the Azure ML emulator)."""
from __future__ import annotations

import contextlib
import io
import itertools
import os
import subprocess
from dataclasses import dataclass, field

from dtrain.backends import BackendKind, register_backend, unregister_backend
from dtrain.backends.base import Backend, JobInfo, LogLine, MetricPoint
from dtrain.errors import BackendError, JobNotFound


@dataclass
class FakePlan:
    name: str
    tags: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    command: str = ""
    backend: str = "local"

    def to_dict(self) -> dict:
        return {"name": self.name, "tags": self.tags, "command": self.command}


class FakeBackend(Backend):
    """script: the statuses a new job goes through (one per status read, the last one stays); scripts[name]
    overrides it for one job. fail_submits[name]: that many submits raise BackendError (throttling) first."""

    poll_cap_s = 0.01

    def __init__(self, kind: str = "local", script=("Queued", "Running", "Completed")):
        self.name = kind
        self.script = list(script)
        self.scripts: dict = {}
        self.fail_submits: dict = {}
        self.lines: dict = {}
        self.points: dict = {}
        self.failures: dict = {}      # name -> FailureInfo, attached when the job ends Failed
        self.jobs: dict = {}          # name -> JobInfo as last read
        self._steps: dict = {}        # name -> remaining statuses
        self.submitted: list = []     # every submit that started a job, in order
        self.submit_calls: list = []
        self.canceled: list = []
        self.stopped: list = []
        self.reads: dict = {}
        self.max_active = 0
        self._names = (f"fake_job_{i}" for i in itertools.count(1))

    # --- scripting -------------------------------------------------------------------------------
    def add(self, info: JobInfo, then=()) -> JobInfo:
        """A job that exists already (submitted elsewhere, or earlier), with what comes after it."""
        self.jobs[info.name] = info
        self._steps[info.name] = list(then)
        return info

    def active(self) -> int:
        return sum(1 for i in self.jobs.values() if not i.terminal)

    # --- the protocol ------------------------------------------------------------------------------
    def plan(self, spec, options):
        return FakePlan(options.name or spec.name or next(self._names), dict(options.tags),
                        command=spec.data.get("command", ""), backend=self.name)

    def submit(self, plan):
        self.submit_calls.append(plan.name)
        if self.fail_submits.get(plan.name):
            self.fail_submits[plan.name] -= 1
            raise BackendError("Azure ML failed to submit (HTTP 429): throttled")
        if plan.name in self.jobs:                      # idempotent: the job exists, follow it
            return self.jobs[plan.name]
        steps = list(self.scripts.get(plan.name, self.script))
        info = JobInfo(name=plan.name, backend=self.name, status=steps.pop(0), tags=dict(plan.tags))
        self.submitted.append(plan.name)
        self.add(info, steps)
        self.max_active = max(self.max_active, self.active())
        return info

    def status(self, name):
        if name not in self.jobs:
            raise JobNotFound(f"no job named '{name}'")
        self.reads[name] = self.reads.get(name, 0) + 1
        steps = self._steps[name]
        if steps:
            info = self.jobs[name]
            status = steps.pop(0)
            ended = "2026-01-01T00:00:00+00:00" if status in ("Completed", "Failed", "Canceled", "NotResponding") else None
            failure = self.failures.get(name) if status == "Failed" else None
            self.jobs[name] = JobInfo(**{**info.__dict__, "status": status, "ended": ended, "failure": failure})
        return self.jobs[name]

    def list(self, *, experiment=None, tags=None, limit=None, names=None):
        infos = [self.status(n) for n in (names if names is not None else list(self.jobs))]
        return [i for i in infos if all(k in i.tags and (v is None or str(i.tags[k]) == str(v))
                                        for k, v in (tags or {}).items())]

    def logs(self, name, *, follow=False, rank=None):
        self.status(name)
        for i, text in enumerate(self.lines.get(name, [])):
            yield LogLine(text, rank=0, node=0)

    def cancel(self, name):
        if self.status(name).terminal:                 # as the real backends: an ended job stays as it ended
            return self.jobs[name]
        self.canceled.append(name)
        self._steps[name] = []
        self.jobs[name] = JobInfo(**{**self.jobs[name].__dict__, "status": "Canceled"})
        return self.jobs[name]

    def stop(self, name):
        self.stopped.append(name)

    def update(self, name, *, tags=None, remove_tags=(), display_name=None, description=None):
        """Tags merged, as az ml job update does (a chain records each attempt's cause so)."""
        info = self.status(name)
        merged = {k: v for k, v in {**info.tags, **(tags or {})}.items() if k not in remove_tags}
        self.jobs[name] = JobInfo(**{**info.__dict__, "tags": merged})
        return self.jobs[name]

    def metrics(self, name, *, keys=None):
        self.status(name)
        pts = self.points.get(name, {})
        return {k: [MetricPoint(s, v, 0) for s, v in p] for k, p in pts.items() if keys is None or k in keys}


def register(fake: FakeBackend):
    """Register `fake` under its kind; returns what to call to put the real one back."""
    old = register_backend(BackendKind(fake.name, lambda **_: fake, holds=lambda n: n in fake.jobs,
                                       workspace_flags=False))
    return lambda: unregister_backend(fake.name, old)


def run_main(capsys, *argv):
    """dtrain's main() in process (the one error boundary): (exit code, stdout, stderr)."""
    from dtrain.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_in_process(argv: list[str], *, env: dict, cwd) -> subprocess.CompletedProcess:
    """dtrain's main() as `python -m dtrain ARGV` would run it, in this process: the process environment
    is `env` and the working folder `cwd` for the call, stdout and stderr captured (not terminals, as in a
    pipe). Both are put back afterwards, whatever the command did to them (azure-ai-ml writes
    AZUREML_CURRENT_CLOUD into os.environ)."""
    from dtrain.cli import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update({k: str(v) for k, v in env.items()})
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:     # what a process would exit with (typer's --show-completion)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["dtrain", *argv], code, out.getvalue(), err.getvalue())
