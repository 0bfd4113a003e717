"""AzureBackend: submit, follow, list and cancel command jobs through azure-ai-ml.

The SDK is imported only when a method needs it (never by `dtrain --help`, validate, render or schema).

Submit is idempotent by name: the name is chosen before the first PUT (plan.py); if a job of that
name exists with the same spec (compared on the fields that workspace resolution does not change),
dtrain follows it instead of submitting again; a different spec under a taken name is a UsageError.
A PUT whose answer was lost is retried by azure-core (PUT is idempotent) and, past that, dtrain looks
the name up before trying again, so a job is never created twice.
"""
from __future__ import annotations

import contextlib
import io
import re
from typing import Any, Iterator

from ...errors import BackendError, ConfigError, DtrainError, JobNotFound, LostTrack, UsageError
from ...spec.model import JobSpec
from ...untrusted import redact
from ...timestamps import parse_time
from ..backoff import Backoff
from ..base import Backend, FailureInfo, JobInfo, LogLine, Notice, Notify, SubmitOptions
from ...settings import current as settings
from .workspace import resolution
from .client import (RememberingCredential, endpoint_from_env, make_credential, make_ml_client, muted_stderr,
                     silence_loggers)
from .errors import azure_errors, translate, transient
from . import jobinfo, sdk
from .plan import AzurePlan, build_plan, differences
from .storage_endpoint import storage_endpoint_from_env
from .upload_guard import guarded, is_storage_failure, upload_error

__all__ = ["AzureBackend", "AzurePlan"]

WORKSPACE_HINT = ("pass --subscription, --resource-group and --workspace; or set DTRAIN_SUBSCRIPTION_ID, "
                  "DTRAIN_RESOURCE_GROUP and DTRAIN_WORKSPACE (AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, "
                  "AZUREML_WORKSPACE_NAME also work); or put the workspace's config.json (Azure portal > "
                  "workspace > Download config.json) in this folder or a parent; or use az's defaults "
                  "(`az configure --defaults group=RG workspace=WS`, `az account set --subscription S`). "
                  "`dtrain config` shows what was found where; see docs/azure.md")
_TIMEOUT_MESSAGE = re.compile(r"(?i)time[ -]?out|timed out|time limit|exceeded the (maximum|max|specified)")


class AzureBackend(Backend):
    name = "azureml"

    def __init__(self, subscription: str | None = None, resource_group: str | None = None,
                 workspace: str | None = None, *, credential=None, notify: Notify | None = None):
        self._flags = (subscription, resource_group, workspace)
        self._notify = notify
        self.notices: list[Notice] = []               # everything told, also without a notify
        self.endpoint = endpoint_from_env()            # ConfigError before anything is sent
        self.storage_endpoint = storage_endpoint_from_env()   # DTRAIN_STORAGE_ENDPOINT: loopback only
        self._credential = credential
        self._ml = None
        self._ws: Any = None                           # the resolved workspace (workspace.py), once asked
        # follow.wait_all polls no faster than this cap allows: Azure calls cost, a local file read does not.
        self.poll_cap_s = settings().number("DTRAIN_AZURE_POLL_CAP_S")
        self.log_poll_s = settings().number("DTRAIN_AZURE_LOG_POLL_S")
        self.log_poll_cap_s = settings().number("DTRAIN_AZURE_LOG_POLL_CAP_S")
        self.status_attempts = int(settings().number("DTRAIN_AZURE_STATUS_ATTEMPTS"))
        self._final: dict[str, JobInfo] = {}          # terminal JobInfo per job: terminal is final
        self._details_cache: dict[str, dict] = {}
        self._mlflow_rest: Any = None                  # the workspace's MLflow REST client (metrics)
        self._experiment_ids: dict[str, str | None] = {}
        self._search_state: dict = {}
        self._capacity: Any = None                     # capacity.Reader: compute and quota reads, cached
        self._monitor_rest: Any = None                 # Azure Monitor's metrics API (system metrics)
        self._vm_sizes: dict = {}                      # compute name -> its VM size (top redraws)

    # --- configuration -------------------------------------------------------------------------
    def workspace(self, *, submitting: bool = False):
        if self._ws is None:
            r = resolution(*self._flags)
            ws = r.workspace()
            if ws is None:
                hint = WORKSPACE_HINT
                if submitting:
                    hint += "; or run the job on this machine with `dtrain submit SPEC --local`"
                raise ConfigError(r.missing_message(), hint=hint)
            self._ws = ws
        return self._ws

    def where(self) -> dict:
        """The workspace this backend's jobs live in (resolved by the submit that asks), for jobindex."""
        ws = self.workspace()
        return {"subscription_id": ws.subscription_id, "resource_group": ws.resource_group,
                "workspace_name": ws.workspace_name}

    @property
    def ml(self):
        if self._ml is None:
            ws = self.workspace()
            with azure_errors("connect to Azure ML", workspace=ws):
                if self._credential is None:      # one credential for MLClient and the MLflow reads
                    self._credential = make_credential(self.endpoint)
                if not isinstance(self._credential, RememberingCredential):
                    # every token sent is registered, so a service error echoing it is redacted
                    self._credential = RememberingCredential(self._credential)
                self._ml = make_ml_client(ws, self.endpoint, self._credential)
        return self._ml

    def _tell(self, text: str, verbatim: bool = False) -> None:
        """Backends never print: what the user should read goes to notify (the CLI prints it)."""
        notice = Notice(redact(text), verbatim=verbatim)    # may carry the SDK's own text
        self.notices.append(notice)
        if self._notify is not None:
            self._notify(notice)

    def capacity(self):
        """Reads of the target compute and the region's quota (capacity.py), cached a while per backend."""
        if self._capacity is None:
            from .capacity import Reader

            self._capacity = Reader(self.ml, self.workspace().workspace_name,
                                    settings().number("DTRAIN_AZURE_CAPACITY_TTL_S"))
        return self._capacity

    def preflight(self, plan: AzurePlan) -> list[str]:
        """`validate --workspace`: the checks submit makes before anything is sent (capacity.py), alone."""
        from .capacity import preflight

        told: list[str] = []
        preflight(self.capacity(), plan.body, told.append)
        return told

    def cluster(self, name: str) -> tuple[str, str] | None:
        """(VM size, region) of the workspace's compute NAME (Compute_Get's vmSize, the workspace's location),
        for pricing a job that names no instance_type; None where there is no such compute or it has no size."""
        reader = self.capacity()
        c = self._retrying(f"read compute {name}", lambda: reader.compute(name))
        return (c.vm_size, self._retrying("read the workspace", reader.region)) if c and c.vm_size else None

    def _errors(self, what: str, job: str | None = None):
        return azure_errors(what, job=job, workspace=self._ws)

    # --- raw reads with retries ------------------------------------------------------------------
    def _retrying(self, what: str, fn, *, job: str | None = None, gave_up=None):
        """fn() with a few more tries on transient errors (after azure-core's own); at the end LostTrack,
        or gave_up(reason) where "the job keeps running" is not what is known."""
        backoff = Backoff(0.5, cap=8.0, factor=2.0)
        last = None
        for attempt in range(max(1, self.status_attempts)):
            try:
                return fn()
            except Exception as exc:
                if not transient(exc):
                    raise translate(exc, what=what, job=job, workspace=self._ws) from exc
                last = exc
                if attempt + 1 < self.status_attempts:
                    backoff.sleep()
        reason = (f"could not {what} after {self.status_attempts} attempts "
                  f"({type(last).__name__}: {redact(str(last)).splitlines()[0] if str(last) else ''})")
        if gave_up is not None:
            raise gave_up(reason)
        raise LostTrack(f"lost track of job '{job}': {reason}",
                        hint="the job keeps running on Azure; `dtrain status " + (job or "NAME") + "` tries again")

    def _get_raw(self, name: str, gave_up=None) -> dict | None:
        """The job resource as REST JSON (properties in camelCase), or None when there is none."""
        from azure.core.exceptions import ResourceNotFoundError

        ml = self.ml

        def get():
            try:
                return jobinfo.as_dict(sdk.job_rest(ml.jobs, name))
            except ResourceNotFoundError as exc:
                if _workspace_missing(exc):
                    raise
                return None

        return self._retrying("read the job", get, job=name, gave_up=gave_up)

    def _run_details(self, name: str) -> dict:
        ml = self.ml
        return self._retrying("read the run details",
                              lambda: jobinfo.as_dict(sdk.run_details(ml.jobs, name)), job=name)

    # --- plan / submit -------------------------------------------------------------------------
    def plan(self, spec: JobSpec, options: SubmitOptions | None = None) -> AzurePlan:
        from ...codefiles import check_code_folder

        check_code_folder(spec.code_path())   # what the SDK's upload would hang or fail on, refused first
        return build_plan(spec, options or SubmitOptions(), self.workspace(submitting=True))

    def image_build(self, plan: AzurePlan) -> str | None:
        from .image_build import predict

        return predict(self.ml, plan.body.get("environmentId"))

    def read_environment(self, ref: str) -> dict | None:
        from .env_lookup import read

        with self._errors("read the environment"):
            return read(self.ml, ref, self.workspace().workspace_name)

    def _load_job(self, plan: AzurePlan):
        from azure.ai.ml import load_job

        silence_loggers()
        with self._errors("load the job spec into azure-ai-ml"):
            return load_job(source=io.StringIO(plan.yaml), relative_origin=plan.relative_origin)

    def submit(self, plan: AzurePlan) -> JobInfo:
        self.workspace(submitting=True)
        name = plan.name

        def unchecked(reason: str) -> BackendError:
            # nothing has been sent yet: no job, so "lost track" (7) would be wrong
            return BackendError(f"could not check whether an Azure ML job named '{name}' exists ({reason}); "
                                "nothing was submitted",
                                hint="Azure ML is unavailable or throttling; run the same command again (with "
                                     "the same --name it is safe to repeat)")

        existing = self._get_raw(name, gave_up=unchecked)
        if existing is not None:
            return self._adopt(plan, existing)
        from .capacity import preflight

        preflight(self.capacity(), plan.body, self._tell)   # exit 2 before any upload or PUT where it never starts
        build = self.image_build(plan)
        if build:
            self._tell(build)
        ml = self.ml
        backoff = Backoff(1.0, cap=4.0, factor=2.0)
        for attempt in range(3):
            job = self._load_job(plan)
            try:
                with muted_stderr(lambda text: self._tell(text, verbatim=True)):
                    created = guarded(lambda: ml.jobs.create_or_update(job))
                break
            except Exception as exc:
                if isinstance(exc, DtrainError):
                    raise
                if is_storage_failure(exc):      # the code upload comes before the job PUT
                    raise upload_error(exc, name, _local_inputs(plan.body), plan.body.get("codeId")) from exc
                if not _sent_to_azure(exc):
                    raise translate(exc, what=f"submit job '{name}'", job=name, workspace=self._ws) from exc
                # A request may have been processed with its answer lost, and a retry of it refused
                # (azure-core retries a PUT by itself): look before saying what happened or sending again.
                existing = self._get_raw(name, gave_up=lambda reason, exc=exc: _maybe_submitted(name, exc, reason))
                if existing is not None:
                    info = self._adopt(plan, existing, ours=True)
                    if not transient(exc):
                        self._tell(f"Azure ML refused a repeated submit request ({_first_line(exc)}), but job "
                                   f"'{name}' exists with this spec: the first request was processed")
                    return info
                if not transient(exc) or attempt == 2:
                    raise translate(exc, what=f"submit job '{name}'", job=name, workspace=self._ws) from exc
                backoff.sleep()
        info = jobinfo.info_from_entity(created, self.name)
        from .capacity import annotate

        annotate(self.capacity(), info, plan.body)    # why it waits, from its first status on
        return info

    def _adopt(self, plan: AzurePlan, existing: dict, ours: bool = False) -> JobInfo:
        props = existing.get("properties") or {}
        diffs = differences(plan.body, props, name=plan.name)
        if diffs:
            raise UsageError(f"an Azure ML job named '{plan.name}' already exists with a different spec "
                             f"(differs in {', '.join(diffs)}); nothing was submitted",
                             hint="give a new name with --name (or drop `name:` from the spec to get a generated "
                                  f"one); `dtrain status {plan.name}` shows the existing job")
        if not ours:
            self._tell(f"job '{plan.name}' already exists with this spec ({jobinfo.status_text(props.get('status'))}): "
                       "following it instead of submitting again")
        return jobinfo.info_from_rest(existing, self.name)

    # --- status ----------------------------------------------------------------------------------
    def status(self, name: str) -> JobInfo:
        if name in self._final:
            return self._final[name]
        raw = self._get_raw(name)
        if raw is None:
            raise JobNotFound(f"no Azure ML job named '{name}' in workspace {self.workspace().workspace_name}",
                              hint="`dtrain list` shows the jobs")
        info = jobinfo.info_from_rest(raw, self.name)
        from .capacity import annotate

        annotate(self.capacity(), info, raw.get("properties") or {})   # VM size; why it waits
        if info.terminal:
            self._complete(info, raw.get("properties") or {})
            self._final[name] = info
        return info

    def knows(self, name: str) -> bool:
        try:
            return self._get_raw(name) is not None
        except JobNotFound:
            return False

    def _complete(self, info: JobInfo, props: dict) -> None:
        """Times, failure and timeout of a terminal job, from its run details (one read per job)."""
        try:
            rd = self._run_details(info.name)
        except (LostTrack, JobNotFound, ConfigError):
            return
        info.started = jobinfo.iso(parse_time(rd.get("startTimeUtc") or rd.get("start_time_utc"))) or info.started
        info.ended = jobinfo.iso(parse_time(rd.get("endTimeUtc") or rd.get("end_time_utc"))) or info.ended
        message = jobinfo.error_message(rd.get("error"))
        limit = jobinfo.timeout_seconds(props)
        if limit and info.status in ("Canceled", "Failed"):
            s, e = parse_time(info.started), parse_time(info.ended)
            ran = (e - s).total_seconds() if s and e else None
            info.timed_out = bool((message and _TIMEOUT_MESSAGE.search(message)) or (ran is not None and ran >= limit))
        if info.status == "Failed":
            info.failure = self._failure(info, message, rd, jobinfo.tf_workers(props), props)
        elif info.status in ("NotResponding", "Paused") and message:   # why a node was lost (exit 5)
            info.failure = FailureInfo(message=message)

    def _failure(self, info: JobInfo, message: str | None, rd: dict, workers: int | None = None,
                 props: dict | None = None) -> FailureInfo:
        import requests

        from ..failure import last_lines, traceback_block
        from .logs import tail_lines, user_logs

        try:
            log_files = self._log_sources(info.name, props or {}).files(rd.get("logFiles") or rd.get("log_files") or {})
        except Exception:               # the summary still has the service's message
            log_files = rd.get("logFiles") or rd.get("log_files") or {}
        files = user_logs(log_files, workers)
        found = None
        tails = {}
        with requests.Session() as s:
            for r, (_, url) in sorted(files.items())[:64]:
                lines = tail_lines(s, url)
                tails[r] = lines
                tb = traceback_block(lines)
                if tb:
                    found = (r, tb)
                    break
        ppn = max(info.processes_per_node, 1)
        if found:
            r, tb = found
            return FailureInfo(message=message or f"rank {r} failed", rank=r, node=r // ppn,
                               last_lines=last_lines(tails[r]), traceback=tb)
        lines = next((t for t in tails.values() if t), [])
        single = len(files) == 1
        return FailureInfo(message=message or "the job failed (Azure ML gave no reason)",
                           rank=0 if single else None, node=0 if single else None, last_lines=last_lines(lines))

    # --- logs ----------------------------------------------------------------------------------
    def logs(self, name: str, *, follow: bool = False, rank: int | None = None) -> Iterator[LogLine]:
        from .logs import follow_logs

        raw = self._get_raw(name)
        if raw is None:
            raise JobNotFound(f"no Azure ML job named '{name}'", hint="`dtrain list` shows the jobs")
        props = raw.get("properties") or {}
        nodes = int((props.get("resources") or {}).get("instanceCount") or 1)
        _, ppn, world = jobinfo.shape_of(nodes, jobinfo.rest_distribution(props))
        if rank is not None and not 0 <= rank < world:
            raise UsageError(f"job '{name}' has no rank {rank}", hint=f"ranks are 0..{world - 1}")
        ml = self.ml
        sources = self._log_sources(name, props)

        def details():
            try:
                rd = jobinfo.as_dict(sdk.run_details(ml.jobs, name))
                files = sources.files(rd.get("logFiles") or rd.get("log_files") or {})
            except DtrainError:
                raise
            except Exception as exc:
                if transient(exc):
                    raise                       # follow_logs tries again, then raises LostTrack
                raise translate(exc, what="read the job's logs", job=name, workspace=self._ws) from exc
            return jobinfo.status_text(rd.get("status")), files

        return follow_logs(details, follow=follow, rank=rank, ppn=ppn, workers=jobinfo.tf_workers(props),
                           cadence=Backoff(self.log_poll_s, self.log_poll_cap_s))

    def files(self, name: str, *, outputs: list | None = None, logs: bool = False) -> list:
        """The job's outputs and logs on its datastores, for `dtrain download` (output_files.py)."""
        from .output_files import log_files, output_files

        raw = self._get_raw(name)
        if raw is None:
            raise JobNotFound(f"no Azure ML job named '{name}'", hint="`dtrain list` shows the jobs")
        props = raw.get("properties") or {}
        files = [] if outputs == [] else output_files(self.ml, name, props, outputs, self.storage_endpoint)
        if logs:
            rd = self._run_details(name)
            files += log_files(self._log_sources(name, props).files(rd.get("logFiles") or rd.get("log_files") or {}))
        return files

    def _log_sources(self, name: str, props: dict):
        """logFiles, else the job's default output folder on its datastore (storage_logs.py)."""
        from .storage_logs import LogSources, default_output_folder, resolve_folder

        where = default_output_folder(props)
        ml = self.ml
        return LogSources(name, where and (lambda: resolve_folder(ml, *where, self.storage_endpoint)))

    # --- metrics (mlflow_rest.py) -------------------------------------------------------------------
    def _mlflow(self):
        """The workspace's MLflow REST client: its tracking URI read once (one workspace GET) per backend."""
        if self._mlflow_rest is None:
            from .client import ENV_RETRY_BACKOFF, ENV_RETRY_TOTAL
            from .mlflow_rest import MlflowRest, tracking_base

            ml = self.ml
            ws_name = self.workspace().workspace_name
            uri = self._retrying("read the workspace's MLflow tracking URI",
                                 lambda: ml.workspaces.get(ws_name).mlflow_tracking_uri)
            if not uri:
                raise BackendError(f"workspace {ws_name} has no MLflow tracking URI (mlFlowTrackingUri)",
                                   hint="metrics are read from the workspace's MLflow tracking API")
            self._mlflow_rest = MlflowRest(tracking_base(uri, allow_http=self.endpoint.loopback), self._credential,
                                           self.endpoint.url.rstrip("/") + "/.default",
                                           retry_total=int(settings().number(ENV_RETRY_TOTAL)),
                                           backoff=settings().number(ENV_RETRY_BACKOFF))
        return self._mlflow_rest

    def _mlflow_call(self, what: str, fn, job: str | None = None, command: str = "metrics"):
        """fn() with dtrain's retries over azure-core's; MLflow's (and Azure Monitor's) errors as dtrain's."""
        from .mlflow_rest import MlflowError

        def unreadable(reason: str):         # the metrics are unreadable now; nothing is known of the job
            return LostTrack(f"{reason}", hint=f"the job itself is not affected; `dtrain {command} "
                             + (job or "NAME") + "` reads them again")

        try:
            return self._retrying(what, fn, job=job, gave_up=unreadable)
        except MlflowError as exc:
            raise BackendError(f"could not {what}: {redact(str(exc))}") from None

    def metrics_reader(self, name: str, *, keys=None):
        from .mlflow_rest import RunMetrics

        self.status(name)                              # JobNotFound for an unknown job
        reader = RunMetrics(self._mlflow(), name, keys)
        backend = self

        class Reader:
            points = reader.points

            def poll(self):
                return backend._mlflow_call("read the job's metrics", reader.poll, job=name)

        return Reader()

    def metrics(self, name: str, *, keys=None) -> dict:
        reader = self.metrics_reader(name, keys=keys)
        reader.poll()
        return reader.points

    def latest_metrics(self, jobs) -> dict:
        """One runs/search for all the jobs (plus, once per experiment, its id by name)."""
        from .mlflow_rest import latest_by_run

        rest = self._mlflow()
        ids = []
        for exp in sorted({j.experiment_name or "Default" for j in jobs}):
            if exp not in self._experiment_ids:
                self._experiment_ids[exp] = self._mlflow_call("look up an experiment", lambda: rest.experiment_id(exp))
            if self._experiment_ids[exp]:
                ids.append(self._experiment_ids[exp])
        return self._mlflow_call("read the jobs' latest metrics",
                                 lambda: latest_by_run(rest, [j.name for j in jobs], ids, self._search_state))

    # --- system metrics (monitor.py) ------------------------------------------------------------
    def _monitor(self):
        if self._monitor_rest is None:
            from .client import ENV_RETRY_BACKOFF, ENV_RETRY_TOTAL
            from .monitor import MonitorRest, workspace_id

            self.ml                                    # the credential, as for every other call
            self._monitor_rest = MonitorRest(self.endpoint.url, workspace_id(self.workspace()), self._credential,
                                             self.endpoint.url.rstrip("/") + "/.default",
                                             retry_total=int(settings().number(ENV_RETRY_TOTAL)),
                                             backoff=settings().number(ENV_RETRY_BACKOFF))
        return self._monitor_rest

    def sysmetrics(self, name: str):
        from .monitor import compute_name, job_sysmetrics

        info = self.status(name)
        compute = compute_name(self._get_raw(name))
        if compute and compute not in self._vm_sizes:
            ml = self.ml
            self._vm_sizes[compute] = None
            with contextlib.suppress(Exception):      # a compute since deleted: no size, no IB finding
                self._vm_sizes[compute] = self._retrying("read the job's compute",
                                                         lambda: ml.compute.get(compute).size, job=name)
        return self._mlflow_call("read the job's system metrics", command="top", job=name,
                                 fn=lambda: job_sysmetrics(self._monitor(), info, self._vm_sizes.get(compute)))

    def latest_sysmetrics(self, jobs) -> dict:
        """One Azure Monitor request for the GPU utilization of every job shown (watch)."""
        from .monitor import latest_gpu_util

        rest = self._monitor()
        got = self._mlflow_call("read the jobs' GPU utilization", lambda: latest_gpu_util(rest, [j.name for j in jobs]),
                                command="top")
        return {n: {"gpu_util": tv} for n, tv in got.items()}

    # --- cancel ----------------------------------------------------------------------------------
    def cancel(self, name: str) -> JobInfo:
        info = self.status(name)
        if info.terminal:
            return info
        ml = self.ml

        def request():
            poller = ml.jobs.begin_cancel(name)
            poller.result(timeout=settings().number("DTRAIN_AZURE_CANCEL_WAIT_S"))

        self._retrying("cancel the job", request, job=name)
        # the service answers 202 and ends the job later (31 s in the recording): a job not yet terminal reads
        # CancelRequested (or still its earlier status), and `wait` counts it as not ended (status.py)
        return self.status(name)

    def stop(self, name: str) -> None:
        """Ask Azure ML to cancel a run that dtrain counts as ended NotResponding: the REST spec says such a run
        can go back to an earlier status, and a retry chain (chain.py) must not have two attempts running."""
        ml = self.ml

        def request():
            ml.jobs.begin_cancel(name).result(timeout=settings().number("DTRAIN_AZURE_CANCEL_WAIT_S"))

        self._retrying("cancel the job", request, job=name)

    # --- metadata: update, archive ------------------------------------------------------------------
    def update(self, name: str, *, tags: dict | None = None, remove_tags=(), display_name: str | None = None,
               description: str | None = None) -> JobInfo:
        """What `az ml job update --set tags.k=v` ends up sending through azure-ai-ml: jobs.update (the run
        history PATCH Studio uses; it merges tags), plus a tag PATCH with tagsToDelete for --remove-tag."""
        info = self.status(name)                  # JobNotFound before anything is sent
        ml, ws = self.ml, self.workspace()

        def request():
            if tags or display_name is not None or description is not None:
                ml.jobs.update(name, display_name=display_name, description=description, tags=tags or None)
            if remove_tags:
                sdk.delete_tags(ml.jobs, ws, info.experiment_name or "Default", name, list(remove_tags))

        self._retrying("update the job", request, job=name)   # both merge: a retry changes nothing more
        self._final.pop(name, None)               # a terminal job's cached JobInfo has the old metadata
        return self.status(name)

    def set_archived(self, name: str, archived: bool) -> JobInfo:
        self.status(name)
        ml = self.ml
        self._retrying("archive the job" if archived else "restore the job",
                       lambda: ml.jobs.archive(name) if archived else ml.jobs.restore(name), job=name)
        self._final.pop(name, None)
        return self.status(name)

    # --- list ----------------------------------------------------------------------------------
    def list_archived(self, *, only: bool, experiment: str | None = None, tags: dict | None = None,
                      limit: int | None = None) -> list[JobInfo]:
        return self.list(experiment=experiment, tags=tags, limit=limit, archived="only" if only else "all")

    def list(self, *, experiment: str | None = None, tags: dict | None = None,
             limit: int | None = None, names=None, archived: str = "hide") -> list[JobInfo]:
        """One paged list call. The first tag's key filters on the service (the REST spec's `tag`: "Jobs
        returned will have this tag key"), values and other tags here. The newest `limit` jobs by creation
        time, whatever order the service answers in (no recording shows its order). With `names`, paging
        stops as soon as every named job has been seen (archived or not). archived: "hide" (the service's
        ActiveOnly, as az ml job list), "all" or "only"."""
        wanted = set(names) if names else None
        ml = self.ml                          # first: a workspace that is not configured says so (exit 6)
        from azure.ai.ml.constants import ListViewType

        tags = dict(tags or {})
        kwargs: dict = {"list_view_type": ListViewType.ALL if names or archived == "all" else
                        ListViewType.ARCHIVED_ONLY if archived == "only" else ListViewType.ACTIVE_ONLY}
        if tags:
            kwargs["tag"] = next(iter(tags))

        def fetch():
            out = []
            for job in ml.jobs.list(**kwargs):
                if job is None or not jobinfo.listed(job, experiment, tags, wanted):
                    continue
                out.append(job)
                if wanted == set():
                    break
            out.sort(key=jobinfo.created_at, reverse=True)
            return out if limit is None else out[:limit]

        jobs = self._retrying("list jobs", fetch)
        from .capacity import WAITING, annotate

        infos = []
        for job in jobs:
            info = jobinfo.info_from_entity(job, self.name)
            if info.terminal and info.status in ("Canceled", "Failed") and getattr(job, "limits", None) \
                    and getattr(job.limits, "timeout", None):
                info = self._final.get(info.name) or self.status(info.name)  # once per ended job, then cached
            info.archived = info.archived or archived == "only"   # a listed entity does not say; its view does
            if info.status in WAITING:                           # why it waits (compute and quota, cached)
                annotate(self.capacity(), info, {"computeId": getattr(job, "compute", None),
                                                 "resources": {"instanceType": info.instance_type}})
            infos.append(info)
        return infos

def _first_line(exc) -> str:
    text = redact(str(getattr(exc, "message", None) or exc)).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _local_inputs(body: dict) -> dict:
    """Input name -> path, for the inputs the SDK uploads from this machine (no scheme, no azureml: id)."""
    inputs = body.get("inputs") or {}
    return {k: v["uri"] for k, v in inputs.items()
            if isinstance(v, dict) and isinstance(v.get("uri"), str) and ":" not in v["uri"]}


def _sent_to_azure(exc) -> bool:
    """The failure came from an HTTP exchange, so the job PUT may have reached the service."""
    from azure.core.exceptions import AzureError

    try:
        import requests
        net: tuple = (AzureError, requests.RequestException, ConnectionError, TimeoutError)
    except ImportError:  # pragma: no cover
        net = (AzureError, ConnectionError, TimeoutError)
    return isinstance(exc, net)


def _maybe_submitted(name: str, exc, reason: str) -> LostTrack:
    return LostTrack(f"job '{name}' may have been submitted: the submit request failed ({_first_line(exc)}) and "
                     f"the job could not be looked up afterwards ({reason})",
                     hint=f"`dtrain status {name}` shows whether it exists; submitting again with the same "
                          "--name is safe (an existing job of this spec is followed, not submitted twice)")


def _workspace_missing(exc) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    code = str(getattr(getattr(exc, "error", None), "code", "") or "")
    return code in ("ResourceGroupNotFound", "WorkspaceNotFound", "SubscriptionNotFound") or \
        "resource group" in text or "workspaces/" in text or "subscription" in text
