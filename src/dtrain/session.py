"""The library under the command line: what one dtrain command does, without printing.

A Session knows the workspace flags the command was given, holds one backend per kind (and per
workspace), sends a job name to the backend that owns it (recorded at submit, see jobindex), submits,
and follows jobs as a stream of events (follow.py) that the caller prints. cli.py is parsing and
printing over it; tests and other programs can drive it directly.
"""
from __future__ import annotations

from typing import Iterator

from . import follow, jobindex
from .backends.azure.workspace import PARTS as WORKSPACE_PARTS  # noqa: F401  (no SDK: backends/azure is lean)
from .backends.base import Backend, JobInfo, Notify, Plan, SubmitOptions
from .errors import JobNotFound, UsageError
from .spec.model import JobSpec

LOCAL, AZURE = "local", "azureml"


class Session:
    def __init__(self, subscription: str | None = None, resource_group: str | None = None,
                 workspace: str | None = None, *, notify: Notify | None = None):
        self.flags = {"subscription": subscription, "resource_group": resource_group, "workspace": workspace}
        self.notify = notify
        self._backends: dict = {}
        self._chained: dict = {}

    # --- backends --------------------------------------------------------------------------------
    def backend(self, kind: str, workspace: dict | None = None) -> Backend:
        """One backend object per kind (and Azure workspace) for the whole session, so that jobs can be
        grouped per backend (one list call per poll for many jobs)."""
        flags = self._flags_with(workspace) if kind == AZURE else {}
        key = (kind, tuple(sorted(flags.items())))
        if key not in self._backends:
            from .backends import get_backend

            self._backends[key] = get_backend(kind, notify=self.notify, **flags)
        return self._backends[key]

    def _flags_with(self, recorded: dict | None) -> dict:
        """The command's flags, with a job's recorded workspace filling the parts no flag gave."""
        rec = recorded or {}
        parts = {"subscription": "subscription_id", "resource_group": "resource_group", "workspace": "workspace_name"}
        return {flag: self.flags.get(flag) or rec.get(part) for flag, part in parts.items()}

    def workspace_resolution(self):
        """The Azure ML workspace the flags, variables, config files and az defaults name, part by part with
        where each part came from (backends/azure/workspace.py); loads no SDK."""
        from .backends.azure.workspace import resolution

        return resolution(self.flags["subscription"], self.flags["resource_group"], self.flags["workspace"])

    def azure_wanted(self) -> bool | None:
        """True when the workspace is complete; False when it is meant but incomplete (the Azure backend then
        exits 6 naming the missing part); None when nothing says Azure is meant (local jobs only)."""
        r = self.workspace_resolution()
        return True if not r.missing else (False if r.intended else None)

    def backend_for(self, name: str, local: bool = False, *, drive: bool = False) -> Backend:
        """The backend that owns a job: a local job of that name; else the Azure workspace recorded when
        this machine submitted it; else the configured workspace (a job submitted elsewhere). The local
        store is looked up without loading the local backend, so Azure commands work where it cannot run
        (docs/local-backend.md, Platforms). A retry chain's name shows the chain (chain.py); with drive,
        following it also submits its next attempts."""
        from .backends import local_job_exists

        if local or local_job_exists(name):
            return self.chained(self.backend(LOCAL), drive)
        entry = jobindex.lookup(name)
        if entry and entry.get("backend") == AZURE:
            return self.chained(self.backend(AZURE, entry.get("workspace")), drive)
        if self.azure_wanted() is None:
            raise JobNotFound(f"no local job named '{name}', and no Azure ML workspace is configured",
                              hint="`dtrain list --local` shows local jobs; see docs/azure.md to configure a workspace")
        return self.chained(self.backend(AZURE), drive)

    def chained(self, backend: Backend, drive: bool = False) -> Backend:
        """The backend seen through retry chains (chain.ChainBackend): one per backend and mode, so many jobs
        of one backend are still read with one list call per poll."""
        from .chain import ChainBackend

        key = (id(backend), drive)
        if key not in self._chained:
            self._chained[key] = ChainBackend(backend, self, drive=drive)
        return self._chained[key]

    def listing_backend(self, local: bool) -> Backend:
        """Where list and watch look: local jobs with --local or when no workspace is meant, else Azure.
        Where the local backend cannot run, an unconfigured workspace is the error to report."""
        from .backends import local_platform_problem

        use_local = local or (self.azure_wanted() is None and local_platform_problem() is None)
        return self.chained(self.backend(LOCAL if use_local else AZURE))

    # --- submit ----------------------------------------------------------------------------------
    def plan(self, spec: JobSpec, options: SubmitOptions, *, local: bool) -> Plan:
        """What submit would send, as a value (render and submit --dry-run print it)."""
        kind = LOCAL if local or spec.is_local_compute else AZURE
        return self.backend(kind).plan(spec, options)

    def render_azure(self, spec: JobSpec, *, format: str, name: str | None = None):
        """The Azure job as `az ml job create --file` takes it (format "yaml", a str), or the whole job PUT
        body azure-ai-ml sends (format "rest", a dict). Lives with the Azure backend; loads no SDK."""
        from .backends.azure import render

        return render.rest_document(spec, name=name) if format == "rest" else render.to_yaml(spec, name=name)

    def submit(self, plan: Plan, backend: Backend | None = None) -> JobInfo:
        """Start the planned job (on `backend`, the one that planned it, when given), and record which backend
        (and workspace) owns it."""
        backend = backend or self.backend(plan.backend)
        info = backend.submit(plan)
        if plan.backend == AZURE:
            ws = backend.workspace()  # type: ignore[attr-defined]   # resolved by the submit above
            jobindex.record(info.name, AZURE, {"subscription_id": ws.subscription_id,
                                               "resource_group": ws.resource_group,
                                               "workspace_name": ws.workspace_name})
        return info

    def submit_chain(self, spec: JobSpec, options: SubmitOptions, policy, *, local: bool) -> JobInfo:
        """Submit attempt 1 of a retry chain (chain.py) named options.name (generated when absent), and save
        the recipe that lets a follower submit the next attempts. A chain that exists already is followed:
        attempt 1 is the same job, so it is not submitted again. Returns the chain as one job."""
        from . import chain as ch
        from .backends.names import generate_name

        name = options.name or spec.name or generate_name()
        ch.check_chain_name(name, policy.retries)
        is_local = local or spec.is_local_compute
        backend = self.backend(LOCAL if is_local else AZURE)
        plan = ch.attempt_plan(backend, spec, name, 1, policy, input_paths=options.input_paths)
        try:
            first = self.submit(plan, backend)
        except UsageError as exc:            # the name is taken by another job: say so if it is a chain's
            raise ch.refused_rerun(backend, name, exc) from None
        if not ch.belongs(first, name, 1):   # followed a job of that name that is not this chain's attempt 1
            raise UsageError(f"a job named '{name}' exists and is not attempt 1 of a retry chain; nothing was submitted",
                             hint="give a new name with --name")
        # Only now: a re-run that was refused (another spec under this name) must not change what the chain's
        # next attempts run.
        ch.save_recipe(name, spec, options.input_paths, is_local, policy)
        return self.chained(backend).status(name)

    def clean(self, older_than: str, *, dry_run: bool, snapshots_only: bool):
        """Remove finished local jobs older than an age such as 7d (backends/local/clean.py)."""
        from .backends.local.clean import clean, parse_age

        return clean(self.backend(LOCAL), parse_age(older_than), dry_run=dry_run, snapshots_only=snapshots_only)

    # --- following -------------------------------------------------------------------------------
    def follow(self, names: list[str], *, local: bool = False, timeout: float | None = None,
               stream: bool = False, submitted: JobInfo | None = None) -> Iterator[follow.Event]:
        """Follow jobs to the end: with stream (one job), its log lines and start-up progress; else a
        StatusChanged per change. The last event is Ended; follow.WaitTimeout when `timeout` passes."""
        backends = {n: self.backend_for(n, local, drive=True) for n in names}
        if stream and len(names) == 1:
            n = names[0]
            return follow.stream_events(backends[n], n, timeout, first=submitted)
        return follow.wait_events(backends, timeout)

    # --- metrics ---------------------------------------------------------------------------------
    def metrics(self, name: str, *, keys=None, local: bool = False) -> dict:
        """Every point of each metric the job logged (Backend.metrics), key -> [MetricPoint]."""
        return self.backend_for(name, local).metrics(name, keys=keys)

    def follow_metrics(self, name: str, *, keys=None, local: bool = False,
                       interval: float = 2.0) -> Iterator[tuple]:
        """(new points, all points, JobInfo) after each poll of an incremental reader (a poll fetches
        only what it has not seen), until the job is terminal; the last poll comes after that, so the
        points logged at the very end are in it."""
        import time

        from .errors import LostTrack

        backend = self.backend_for(name, local)
        reader = backend.metrics_reader(name, keys=keys)
        failures = 0
        while True:
            info = backend.status(name)           # before the poll: a terminal status means nothing follows
            try:
                new = reader.poll()
                failures = 0
            except LostTrack:                     # the reader keeps its place: the next poll goes on from it
                failures += 1
                if failures >= 5 or info.terminal:
                    raise
                time.sleep(interval)
                continue
            yield new, reader.points, info
            if info.terminal:
                return
            time.sleep(interval)

