"""A job's system metrics from Azure Monitor, over the Azure backend's own credential, pipeline and retries.

Azure ML records per-node, per-GPU metrics of every job (the Studio's Monitoring tab) as Azure Monitor
metrics of the workspace resource (Microsoft.MachineLearningServices/workspaces, "Resource" category):
GpuUtilizationPercentage, GpuMemoryUtilizationMegabytes, GpuEnergyJoules, CpuUtilizationPercentage,
IBTransmitMegabytes, IBReceiveMegabytes, DiskUsedMegabytes, with the dimensions RunId, InstanceId and
DeviceId; older workspaces answer the earlier names GpuUtilization, GpuMemoryUtilization and
CpuUtilization, with runId, NodeId and DeviceId. There is no SDK call for them (azure-sdk-for-python
#33633), so dtrain makes the one documented REST call, Metrics_List (2024-02-01):

  GET {arm}{workspace id}/providers/Microsoft.Insights/metrics?metricnames=..&$filter=..&timespan=..
      &interval=..&aggregation=..&top=..&ValidateDimensions=false

- Both namings in one request (at most 20 names): a workspace answers the names its jobs emit, an empty
  timeseries list for the others.
- $filter names each dimension to split by (`X eq '*'`); dimension names compare case-insensitively
  (the service answers them in lower case), so `RunId eq 'job'` also selects the legacy runId, and
  ValidateDimensions=false lets a metric without InstanceId (or NodeId) ignore that clause.
- `top` defaults to 10 series per metric once a filter is given: 2 nodes x 8 GPUs is 16, so it is set.
- `watch` reads the latest GPU utilization of every job it shows in ONE request: `RunId eq 'a' or
  RunId eq 'b' ...` (or across values of one dimension is what $filter allows), split by run.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ...sysmetrics import Series, merge
from ...timestamps import parse_time
from .mlflow_rest import MlflowError

API_VERSION = "2024-02-01"
NAMESPACE = "Microsoft.MachineLearningServices/workspaces"
# Azure's name -> (dtrain's name, unit, the aggregation that means it per interval)
CURRENT = {
    "GpuUtilizationPercentage": ("gpu_util", "%", "average"),
    "GpuMemoryUtilizationMegabytes": ("gpu_mem", "MB", "average"),
    "GpuEnergyJoules": ("gpu_energy", "J", "total"),
    "CpuUtilizationPercentage": ("cpu_util", "%", "average"),
    "IBTransmitMegabytes": ("ib_tx", "MB", "total"),
    "IBReceiveMegabytes": ("ib_rx", "MB", "total"),
    "DiskUsedMegabytes": ("disk_used", "MB", "average"),
}
LEGACY = {
    "GpuUtilization": ("gpu_util", "%", "average"),
    "GpuMemoryUtilization": ("gpu_mem_pct", "%", "average"),
    "CpuUtilization": ("cpu_util", "%", "average"),
}
GPU_UTIL = ("GpuUtilizationPercentage", "GpuUtilization")
TOP = 1000               # series per metric: every device of every node of a job (the service's default is 10)
WATCH_WINDOW_S = 900
ROLE_HINT = ("reading a job's system metrics needs Microsoft.Insights/metrics/read on the workspace (the Reader and "
             "Monitoring Reader roles have it); the job itself is not affected")     # watch's latest value: the last quarter hour, one point a minute


class MonitorError(MlflowError):
    """An error Azure Monitor answered: an MlflowError's kind (a REST call dtrain makes itself), so the
    backend's retries (errors.transient) treat both alike."""


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def job_filter(run_id: str) -> str:
    return f"RunId eq {_quote(run_id)} and InstanceId eq '*' and NodeId eq '*' and DeviceId eq '*'"


def runs_filter(run_ids) -> str:
    return " or ".join(f"RunId eq {_quote(r)}" for r in run_ids)


def grain(seconds: float) -> str:
    """The interval for a timespan: one point a minute up to a day, coarser beyond (at most ~1440 points)."""
    for s, iso in ((86400, "PT1M"), (5 * 86400, "PT5M"), (15 * 86400, "PT15M"), (30 * 86400, "PT30M")):
        if seconds <= s:
            return iso
    return "PT1H"


def timespan(start: datetime, end: datetime) -> str:
    def iso(t: datetime) -> str:
        return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{iso(start)}/{iso(end)}"


class MonitorRest:
    """Metrics_List on an azure-core pipeline with the backend's credential (as mlflow_rest.MlflowRest)."""

    def __init__(self, arm: str, resource_id: str, credential, scope: str, *, retry_total: int = 5,
                 backoff: float = 0.8, transport=None):
        from .mlflow_rest import rest_pipeline

        self.url = arm.rstrip("/") + "/" + resource_id.strip("/") + "/providers/Microsoft.Insights/metrics"
        self._client = rest_pipeline(arm, credential, scope, retry_total=retry_total, backoff=backoff,
                                     transport=transport)
        self.requests = 0

    def query(self, names, filter_: str, span: str, interval: str, aggregation: str = "average,total") -> dict:
        from azure.core.rest import HttpRequest

        from .mlflow_rest import response_json

        params = {"api-version": API_VERSION, "metricnames": ",".join(names), "metricnamespace": NAMESPACE,
                  "$filter": filter_, "timespan": span, "interval": interval, "aggregation": aggregation,
                  "top": str(TOP), "ValidateDimensions": "false", "AutoAdjustTimegrain": "true"}
        self.requests += 1
        resp = self._client.send_request(HttpRequest("GET", self.url, params=params))
        data = response_json(resp)
        if resp.status_code >= 400:
            inner = data.get("error")
            err = inner if isinstance(inner, dict) else data
            code, message = str(err.get("code") or "Error"), str(err.get("message") or resp.reason)
            if resp.status_code in (401, 403):
                from ...errors import ConfigError

                raise ConfigError(f"Azure Monitor refused to read the workspace's metrics (HTTP {resp.status_code} "
                                  f"{code}): {message}", hint=ROLE_HINT)
            raise MonitorError(resp.status_code, code, message)
        return data


def _dims(ts: dict) -> dict:
    return {str((m.get("name") or {}).get("value") or "").lower(): str(m.get("value") or "")
            for m in ts.get("metadatavalues") or []}


def _series(data: dict) -> tuple[list, str | None]:
    """Metrics_List's answer as dtrain Series, and which naming answered ("current" wins where both did)."""
    out: dict = {"current": [], "legacy": []}
    for metric in data.get("value") or []:
        name = str((metric.get("name") or {}).get("value") or "")
        naming, spec = ("current", CURRENT[name]) if name in CURRENT else ("legacy", LEGACY.get(name))
        if spec is None:
            continue
        ours, unit, agg = spec
        for ts in metric.get("timeseries") or []:
            d = _dims(ts)
            node = d.get("instanceid") or d.get("nodeid") or ""
            points = [(_ms(p.get("timeStamp")), float(p[agg])) for p in ts.get("data") or []
                      if p.get(agg) is not None]
            if points:
                out[naming].append(Series(node, d.get("deviceid", ""), ours, unit, points))
    if out["current"]:
        have = {s.metric for s in out["current"]}
        return merge(out["current"] + [s for s in out["legacy"] if s.metric not in have]), "current"
    return (merge(out["legacy"]), "legacy") if out["legacy"] else ([], None)


def _ms(stamp) -> int:
    t = parse_time(str(stamp or ""))
    return int(t.timestamp() * 1000) if t else 0


def job_series(rest: MonitorRest, run_id: str, start: datetime, end: datetime) -> tuple[list, str | None]:
    """Every system metric of one job, per node and device, from start to end."""
    names = list(CURRENT) + list(LEGACY)
    data = rest.query(names, job_filter(run_id), timespan(start, end), grain((end - start).total_seconds()))
    return _series(data)


def latest_gpu_util(rest: MonitorRest, run_ids, now: datetime | None = None) -> dict:
    """run id -> its GPU utilization (% averaged over its devices) in the latest minute that has one: one
    request for every run, whatever their number."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    now = now or datetime.now(timezone.utc)
    data = rest.query(GPU_UTIL, runs_filter(ids), timespan(now - timedelta(seconds=WATCH_WINDOW_S), now),
                      "PT1M", aggregation="average")
    out: dict = {}
    for metric in data.get("value") or []:
        for ts in metric.get("timeseries") or []:
            run = _dims(ts).get("runid")
            vals = [(p.get("timeStamp"), p["average"]) for p in ts.get("data") or [] if p.get("average") is not None]
            if run in ids and vals and run not in out:
                out[run] = (_ms(vals[-1][0]), float(vals[-1][1]))
    return out


def workspace_id(ws) -> str:
    return (f"/subscriptions/{ws.subscription_id}/resourceGroups/{ws.resource_group}/providers/"
            f"Microsoft.MachineLearningServices/workspaces/{ws.workspace_name}")


def compute_name(raw_job: dict | None) -> str | None:
    """The compute a job ran on, from its resource's computeId (an ARM id, or a bare name)."""
    cid = ((raw_job or {}).get("properties") or {}).get("computeId") or ""
    return cid.rstrip("/").rsplit("/", 1)[-1] or None


def job_sysmetrics(rest: MonitorRest, info, vm_size: str | None, now: datetime | None = None):
    """The SysMetrics of a job (a JobInfo) from its creation (its nodes start later) to its end (or now)."""
    from ...spec.vmsizes import lookup
    from ...sysmetrics import SysMetrics

    now = now or datetime.now(timezone.utc)
    start = parse_time(info.created) or parse_time(info.started) or now - timedelta(hours=1)
    end = parse_time(info.ended) or now
    end = max(end, start + timedelta(minutes=1))
    series, naming = job_series(rest, info.name, start - timedelta(minutes=1), end + timedelta(minutes=1))
    size = lookup(vm_size) if vm_size else None
    limits = {"gpu_mem": size.gpu_memory_gib * 1024} if size and size.gpu_memory_gib else {}
    return SysMetrics(info.name, "azure-monitor", series, nodes=max(1, info.nodes),
                      vm_size=size.name if size else vm_size, limits=limits, naming=naming)
