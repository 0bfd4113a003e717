"""dtrain's Python API and the one library every command acts through (TorchX's Runner is the model).

A Runner submits a spec, follows jobs by name (status, logs, wait, cancel, list, metrics), runs grids,
watches many jobs and drives retry chains, for every registered backend. It never prints: following
yields events (follow.py) and backends' notes go to the `notify` callable it was given. The CLI is one
client of it; a notebook or a pipeline script is another (docs/python-api.md):

    from dtrain import Runner
    runner = Runner()
    job = runner.submit("job_templates/pytorch-ddp.yml", local=True)
    final = runner.wait(job.name)

Which backend owns a job: a kind that holds it on this machine (the local store, without loading the
local backend), else the workspace recorded when this machine submitted it (jobindex), else the
configured workspace (a job submitted elsewhere).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

from . import follow as fl
from . import jobindex
from .backends import AZURE, LOCAL, backend_kinds, get_backend
from .backends.azure.workspace import PARTS as WORKSPACE_PARTS  # noqa: F401  (no SDK: backends/azure is lean)
from .backends.base import Backend, JobInfo, Notify, Plan, SubmitOptions
from .chain import Policy
from .chain_view import ChainView
from .errors import JobNotFound, UsageError
from .spec.model import JobSpec
from .status import JobStatus
from .workspace import Workspace


def parse_status(text: str) -> JobStatus:
    """A status name as --status gives it (any case) -> JobStatus; an unknown one is a usage error."""
    import difflib

    by_lower = {s.value.lower(): s for s in JobStatus}
    found = by_lower.get(str(text).strip().lower())
    if found is None:
        dym = difflib.get_close_matches(str(text).lower(), list(by_lower), n=1, cutoff=0.6)
        raise UsageError(f"'{text}' is not a job status",
                         hint=(f"did you mean '{by_lower[dym[0]].value}'? " if dym else "")
                         + "statuses: " + ", ".join(s.value for s in JobStatus))
    return found


class Runner:
    def __init__(self, workspace: Workspace | None = None, *, notify: Notify | None = None):
        self.workspace = workspace or Workspace()
        self.notify = notify
        self._views: dict = {}

    # --- backends (never handed out: the runner is the facade) ------------------------------------
    def _backend(self, kind: str, recorded: dict | None = None) -> ChainView:
        """One backend per kind (and workspace) for the runner's life, seen through retry chains, so that
        many jobs of one backend are read with one list call per poll."""
        flags = self.workspace.flags(recorded) if kind == AZURE else {}
        key = (kind, tuple(sorted(flags.items())))
        if key not in self._views:
            self._views[key] = ChainView(get_backend(kind, notify=self.notify, **flags), self.notify)
        return self._views[key]

    def _owner(self, name: str, local: bool = False) -> ChainView:
        """The backend that owns a job (see the module's docstring)."""
        if local:
            return self._backend(LOCAL)
        for kind in backend_kinds():
            if kind.holds is not None and kind.holds(name):
                return self._backend(kind.name)
        entry = jobindex.lookup(name)
        if entry and entry.get("backend"):
            return self._backend(entry["backend"], entry.get("workspace"))
        if self.azure_wanted() is None:
            raise JobNotFound(f"no local job named '{name}', and no Azure ML workspace is configured",
                              hint="`dtrain list --local` shows local jobs; see docs/azure.md to configure a workspace")
        return self._backend(AZURE)

    def _listing(self, local: bool) -> ChainView:
        """Where list and watch look: local jobs with --local or when no workspace is meant, else Azure.
        Where the local backend cannot run, an unconfigured workspace is the error to report."""
        from .backends import local_platform_problem

        use_local = local or (self.azure_wanted() is None and local_platform_problem() is None)
        return self._backend(LOCAL if use_local else AZURE)

    def workspace_resolution(self):
        """The Azure ML workspace the flags, variables, config files and az defaults name, part by part with
        where each part came from (backends/azure/workspace.py); loads no SDK."""
        from .backends.azure.workspace import resolution

        w = self.workspace
        return resolution(w.subscription, w.resource_group, w.workspace)

    def azure_wanted(self) -> bool | None:
        """True when the workspace is complete; False when it is meant but incomplete (the Azure backend then
        exits 6 naming the missing part); None when nothing says Azure is meant (local jobs only)."""
        r = self.workspace_resolution()
        return True if not r.missing else (False if r.intended else None)

    def poll_cap(self, names=(), plans=()) -> float:
        """How long a follower may wait between reads of these jobs: the shortest any of their backends asks."""
        caps = [self._backend(p.backend).poll_cap_s for p in plans]
        caps += [self._owner(n).poll_cap_s for n in names]
        return min(caps + [5.0])

    # --- planning and submitting ---------------------------------------------------------------
    @staticmethod
    def load(spec: JobSpec | str | Path, sets=None) -> JobSpec:
        """A JobSpec from a path (validated, SpecError with every problem) or as given."""
        if isinstance(spec, JobSpec):
            return spec
        from .spec.validate import load_spec

        return load_spec(str(spec), sets)[0]

    def plan(self, spec: JobSpec, options: SubmitOptions | None = None, *, local: bool = False) -> Plan:
        """What submit would send, as a value (render and submit --dry-run print it). No side effects."""
        kind = LOCAL if local or spec.is_local_compute else AZURE
        return self._backend(kind).plan(spec, options or SubmitOptions())

    def cluster(self, name: str) -> tuple[str, str] | None:
        """(VM size, region) of the Azure ML compute NAME in the workspace (its vmSize, the workspace's
        location): what prices a job that names a cluster and no instance_type; None where it has none."""
        return self._backend(AZURE).cluster(name)

    def preflight(self, spec: JobSpec, options: SubmitOptions | None = None) -> list[str]:
        """Whether the job can start where it would run, sending nothing (docs/capacity.md): UsageError where it
        never can; what will make it wait, as text."""
        plan = self.plan(spec, options)
        return self._backend(plan.backend).preflight(plan)

    def image_build(self, spec: JobSpec, options: SubmitOptions | None = None) -> str | None:
        """Whether submitting `spec` to Azure ML builds a new environment image (submit --dry-run says it):
        one look-up in the workspace; what cannot be looked up is said, not raised."""
        from .errors import DtrainError

        backend = self._backend(AZURE)
        try:
            return backend.image_build(backend.plan(spec, options or SubmitOptions()))
        except DtrainError as exc:
            return f"whether this submit builds a new image is not known ({exc.message})"

    def read_environment(self, ref: str) -> dict | None:
        """A registered environment's definition, read from the Azure ML workspace (validate --env)."""
        return self._backend(AZURE).read_environment(ref)

    def render_azure(self, spec: JobSpec, *, format: str, name: str | None = None):
        """The Azure job as `az ml job create --file` takes it (format "yaml", a str), or the whole job PUT
        body azure-ai-ml sends (format "rest", a dict). Lives with the Azure backend; loads no SDK."""
        from .backends.azure import render

        return render.rest_document(spec, name=name) if format == "rest" else render.to_yaml(spec, name=name)

    def submit(self, spec: JobSpec | str | Path, options: SubmitOptions | None = None, *, local: bool = False,
               policy: Policy | None = None, sets=None) -> JobInfo:
        """Submit a job (a retry chain with `policy`); returns at once with its first status. The plan's
        notes go to notify. Submitting the same spec under the same name follows the job that exists."""
        spec = self.load(spec, sets)
        options = options or SubmitOptions()
        if policy is not None:
            return self._submit_chain(spec, options, policy, local=local)
        plan = self.plan(spec, options, local=local)
        self._tell_notes(plan)
        return self.submit_plan(plan)

    def submit_plan(self, plan: Plan) -> JobInfo:
        """Start a planned job on the backend that planned it."""
        return self._submit_on(plan, self._backend(plan.backend))

    def _submit_on(self, plan: Plan, backend: Backend) -> JobInfo:
        from .locks import name_lock

        with name_lock("submit", plan.name):   # one submit of a name at a time here
            info = backend.submit(plan)
        where = backend.where()
        if where is not None:                 # later commands find the job without flags (jobindex)
            jobindex.record(info.name, plan.backend, where)
        group = (plan.tags or {}).get("dtrain.group")
        if group:                             # `status G`, `wait G`, `cancel G` know the grid G
            jobindex.record(group, plan.backend, where, kind="groups")
        return info

    def _tell_notes(self, plan: Plan) -> None:
        from .backends.base import Notice

        for n in plan.notes or ():
            if self.notify is not None:
                self.notify(Notice(n))

    def _submit_chain(self, spec: JobSpec, options: SubmitOptions, policy: Policy, *, local: bool) -> JobInfo:
        """Attempt 1 of a retry chain named options.name (generated when absent), and the recipe a follower
        submits the next attempts from. A chain that exists already is followed, not submitted again."""
        from . import chain as ch, chain_recipe
        from .backends.names import generate_name

        name = options.name or spec.name or generate_name()
        ch.check_chain_name(name, policy.retries)
        chain_recipe.check_recipe_storable(name)       # exit 6 before anything is sent, not a chain that cannot retry
        is_local = local or spec.is_local_compute
        backend = self._backend(LOCAL if is_local else AZURE)
        plan = ch.attempt_plan(backend, spec, name, 1, policy, input_paths=options.input_paths,
                               preempt_after_s=options.preempt_after_s)
        try:
            first = self._submit_on(plan, backend)
        except UsageError as exc:            # the name is taken by another job: say so if it is a chain's
            raise ch.refused_rerun(backend, name, exc) from None
        if not ch.belongs(first, name, 1):   # followed a job of that name that is not this chain's attempt 1
            raise UsageError(f"a job named '{name}' exists and is not attempt 1 of a retry chain; nothing was submitted",
                             hint="give a new name with --name")
        # Only now: a re-run that was refused (another spec under this name) must not change what the chain's
        # next attempts run.
        chain_recipe.save_recipe(name, spec, options.input_paths, is_local)
        return backend.status(name)

    def advance(self, name: str) -> JobInfo:
        """The explicit step that drives a retry chain (follow.py takes it): decide, then submit the next
        attempt when it is due. Any other job: its status."""
        from .locks import name_lock

        with name_lock("chain", name):        # followers of one chain take the step one at a time
            return self._owner(name).advance(name, self._submit_on)

    # --- reading jobs ----------------------------------------------------------------------------
    def status(self, name: str, *, local: bool = False) -> JobInfo:
        return self._owner(name, local).status(name)

    def cancel(self, name: str, *, local: bool = False) -> JobInfo:
        return self._owner(name, local).cancel(name)

    def logs(self, name: str, *, follow: bool = False, rank: int | None = None, local: bool = False):
        return self._owner(name, local).logs(name, follow=follow, rank=rank)

    def download(self, name: str, folder: str | Path | None = None, *, outputs: list | None = None,
                 logs: bool = False, local: bool = False, progress=None):
        """A job's outputs (None: all; [] none) and, with logs, its logs, under folder (default ./NAME),
        resumable (download.py). A retry chain's name stands for its latest attempt."""
        from .download import download

        view = self._owner(name, local)
        job = view.latest(name)
        files = view.inner.files(job, outputs=outputs, logs=logs)
        return download(files, Path(folder) if folder else Path.cwd() / job, progress)

    def list(self, *, local: bool = False, experiment: str | None = None, tags: dict | None = None,
             limit: int | None = None, names=None, archived: str = "hide", statuses=()) -> list[JobInfo]:
        """Newest first. archived: "hide" (as az ml job list), "all" (--include-archived) or "only"
        (--archived-only). statuses: keep only jobs in these (JobStatus names, any case; read client side,
        so the limit applies after the filter)."""
        wanted = {parse_status(s) for s in statuses}
        view = self._listing(local)
        cap = None if wanted else limit
        infos = view.list(experiment=experiment, tags=tags, limit=cap, names=names,
                          archived="hide" if names else archived)
        if wanted:
            infos = [i for i in infos if JobStatus.parse(i.status) in wanted][:limit]
        return infos

    # --- changing a submitted job ------------------------------------------------------------------
    def update(self, name: str, *, tags: dict | None = None, remove_tags=(), display_name: str | None = None,
               description: str | None = None, local: bool = False) -> JobInfo:
        """Change a job's tags, display name or description (az ml job update); a retry chain's name changes
        its first attempt, whose tags hold the chain."""
        remove_tags = list(remove_tags or ())
        if not (tags or remove_tags) and display_name is None and description is None:
            raise UsageError("nothing to update", hint="give --tag K=V, --remove-tag K, --display-name or --description")
        both = sorted(set(tags or {}) & set(remove_tags))
        if both:
            raise UsageError(f"tag {', '.join(both)} is both set and removed", hint="give each tag once")
        view = self._owner(name, local)
        view.inner.update(name, tags=dict(tags or {}), remove_tags=remove_tags, display_name=display_name,
                          description=description)
        return view.status(name)

    def archive(self, name: str, *, local: bool = False) -> JobInfo:
        """Hide an ended job from `list` (az ml job archive, which takes ended jobs only)."""
        view = self._owner(name, local)
        info = view.status(name)
        if not info.terminal:
            raise UsageError(f"job '{name}' is {info.status}: only a job that has ended can be archived "
                             "(as on Azure ML)", hint=f"`dtrain cancel {name}` or `dtrain wait {name}` first")
        view.inner.set_archived(name, True)
        return view.status(name)

    def restore(self, name: str, *, local: bool = False) -> JobInfo:
        """Show an archived job in `list` again (az ml job restore)."""
        view = self._owner(name, local)
        view.inner.set_archived(name, False)
        return view.status(name)

    def expand(self, names=(), *, tags: dict | None = None, local: bool = False) -> "List[str]":
        """The jobs some names stand for: a job's own name, or a grid's group name (--matrix --name G: its
        jobs, tagged dtrain.group=G, in the grid's order), plus every job a --tag filter lists. A name that
        is neither: JobNotFound. Each job once, in the order given."""
        from .grid import GROUP_TAG

        jobs = self._existing(list(names), local)
        found: List[str] = []
        for name in names:
            if name in jobs:
                found.append(name)
                continue
            entry = jobindex.lookup(name, kind="groups")        # a grid this machine submitted
            group = self._backend(entry["backend"], entry.get("workspace")).list(tags={GROUP_TAG: name}) \
                if entry and entry.get("backend") else []
            if not group:
                self.status(name, local=local)   # JobNotFound, as for any name that is nothing
            found += sorted(i.name for i in group)
        if tags:
            found += [i.name for i in self.list(local=local, tags=tags)]
        return list(dict.fromkeys(found))

    def _existing(self, names: "List[str]", local: bool) -> set:
        """Which of these names are jobs: one status read for a lone name, else one listing per backend
        (what following them costs anyway), never one read per name."""
        if len(names) == 1:
            try:
                self.status(names[0], local=local)
                return {names[0]}
            except JobNotFound:
                return set()
        return {i.name for b, ns in self._by_backend(names, local=local, unknown_ok=True)
                for i in b.list(names=ns)}

    def _by_backend(self, items, name_of=lambda n: n, *, local: bool = False, unknown_ok: bool = False) -> "List":
        """[(backend, its items)]: items (names, or JobInfos with name_of) grouped by the backend that owns
        each, so that many jobs cost one call per backend. unknown_ok: a name no backend owns is left out."""
        groups: dict = {}
        for item in items:
            try:
                b = self._owner(name_of(item), local)
            except JobNotFound:
                if not unknown_ok:
                    raise
                continue
            groups.setdefault(id(b), (b, []))[1].append(item)
        return list(groups.values())

    def snapshot(self, names) -> dict:
        """Current JobInfo of each name: one status() call for a lone job, one list() call per backend for
        several (so the cost per poll does not grow with the number of jobs); a job seen ending is read
        once more with status() for its failure details."""
        got = {}
        for backend, ns in self._by_backend(names):
            if len(ns) == 1:
                got[ns[0]] = backend.status(ns[0])
                continue
            listed = {i.name: i for i in backend.list(names=ns)}
            for n in ns:
                info = listed.get(n)
                got[n] = backend.status(n) if info is None or info.terminal else info
        return got

    # --- following -------------------------------------------------------------------------------
    def follow(self, names, *, timeout: float | None = None, stream: bool = False,
               submitted: JobInfo | None = None) -> Iterator[fl.Event]:
        """Follow jobs to the end as events: with stream (one job), its log lines and start-up progress;
        else a StatusChanged per change. The last event is Ended; follow.WaitTimeout when `timeout`
        passes. Retry chains are driven (their next attempts submitted) along the way."""
        names = list(names)
        if stream and len(names) == 1:
            return fl.stream(self, names[0], timeout, first=submitted)
        return fl.follow(self, names, options=fl.Options(timeout=timeout))

    def wait(self, *names: str, timeout: float | None = None) -> dict:
        """Block until every job has ended: name -> final JobInfo (status.exit_code turns one into the
        exit-code contract)."""
        return fl.wait_all(self, list(names), timeout)

    # --- metrics ---------------------------------------------------------------------------------
    def metrics(self, name: str, *, keys=None, local: bool = False) -> dict:
        """Every point of each metric the job logged (Backend.metrics), key -> [MetricPoint]."""
        return self._owner(name, local).metrics(name, keys=keys)

    def final_metrics(self, name: str, *, local: bool = False) -> dict:
        """key -> the last point of each metric ({} when none, or when they cannot be read)."""
        from .errors import DtrainError
        from .metrics_view import final_values

        try:
            return final_values(self.metrics(name, local=local))
        except DtrainError:
            return {}

    def latest_metrics(self, infos) -> dict:
        """name -> key -> the latest point of each metric of each job, one batched read per backend; a
        backend that cannot read them now gives none (a metric column is not worth failing a follow for)."""
        return self._batched(infos, lambda b, jobs: b.latest_metrics(jobs))

    def _batched(self, infos, read) -> dict:
        """name -> what read(backend, its jobs) gives for it, one call per backend; a backend that cannot read
        now gives nothing (a column in a live table is not worth failing a follow for), nor does an empty value."""
        from .errors import DtrainError

        got: dict = {}
        for b, jobs in self._by_backend(infos, lambda i: i.name):
            try:
                latest = read(b, jobs)
            except (DtrainError, OSError):
                continue
            got.update({n: v for n, v in (latest or {}).items() if v})
        return got

    def sysmetrics(self, name: str, *, local: bool = False):
        """How the job used its hardware (dtrain.sysmetrics.SysMetrics), None where its backend has none."""
        return self._owner(name, local).sysmetrics(name)

    def hw_findings(self, name: str, *, local: bool = False) -> List:
        """What the job's system metrics say is wrong (hwfindings.Finding); [] when they cannot be read."""
        from .errors import DtrainError
        from .hwfindings import findings

        try:
            return findings(self.sysmetrics(name, local=local))
        except (DtrainError, OSError):
            return []

    def latest_sysmetrics(self, infos) -> dict:
        """name -> {"gpu_util": (ms, %)}: one batched read per backend (watch's GPU column)."""
        return self._batched(infos, lambda b, jobs: b.latest_sysmetrics(jobs))

    def follow_metrics(self, name: str, *, keys=None, local: bool = False,
                       interval: float = 2.0) -> Iterator[tuple]:
        """(new points, all points, JobInfo) after each poll of an incremental reader (a poll fetches
        only what it has not seen), until the job is terminal; the last poll comes after that, so the
        points logged at the very end are in it."""
        from .metrics_follow import follow_metrics

        backend = self._owner(name, local)
        return follow_metrics(backend.metrics_reader(name, keys=keys), lambda: backend.status(name), interval)

    # --- many jobs ---------------------------------------------------------------------------------
    def run_grid(self, grid, *, local: bool, max_parallel: int | None, wait: bool, input_paths: dict | None = None,
                 timeout: float | None = None, metric: str | None = None, sleep=None,
                 tags: dict | None = None) -> Iterator[fl.Event]:
        """Submit every member of a grid (grid.py) with at most max_parallel not yet ended, and with wait
        follow them to the end. Every plan is built before the first submit (a plan error submits nothing)."""
        from .grid import pending

        jobs = pending(self, grid, local=local, input_paths=input_paths, tags=tags)
        opts = fl.Options(wait=wait, timeout=timeout, max_parallel=max_parallel, metrics=bool(metric))
        if sleep is not None:
            opts.sleep = sleep
        return fl.follow(self, (), pending=jobs, options=opts)

    def watch(self, names=None, *, local: bool = False, experiment: str | None = None, tags: dict | None = None,
              interval: float = 5.0, metric: str | None = None):
        """A watch of many jobs (watch.py): what it judges, and its events (a Polled per interval)."""
        from .watch import Watch

        return Watch(self, self._listing(local), names, experiment, tags, interval, metric)

    def clean(self, older_than: str, *, dry_run: bool, snapshots_only: bool, datastores: bool = False,
              envs: bool = False):
        """Remove finished local jobs older than an age such as 7d (backends/local/clean.py), with
        `datastores` the datastore folders only they wrote, with `envs` the job environments no unfinished
        job uses and none used for that age (clean_envs.py)."""
        from .backends.local.clean import clean, parse_age

        return clean(self._backend(LOCAL).inner, parse_age(older_than), dry_run=dry_run,
                     snapshots_only=snapshots_only, datastores=datastores, envs=envs)

    def why(self, name: str, *, local: bool = False) -> "List":
        """Why a job failed: every cause its rank logs show (dtrain.diagnose.Cause), the top cause first;
        [] for a job whose logs show none."""
        from .diagnose import JobFacts, diagnose

        view = self._owner(name, local)
        info = view.status(name)
        return diagnose(view.rank_logs(name), first_rank=info.failure.rank if info.failure else None,
                        job=JobFacts.of(info))
