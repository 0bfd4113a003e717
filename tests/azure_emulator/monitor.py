"""Azure Monitor's metrics API for the emulated workspace: Metrics_List (GET {workspace id}/providers/
Microsoft.Insights/metrics), answering the per-node, per-GPU job metrics Azure ML records.

Shapes from ../shared/conformance/monitor/ (metrics_API.json 2024-02-01 and its GetMetric.json example:
the Response with cost, timespan, interval, value[] of Metric with name {value, localizedValue}, unit,
timeseries[] of {metadatavalues [{name {value, localizedValue}, value}], data [{timeStamp, average, ...}]},
errorCode). The parameters' rules are the spec's: metricnames (at most 20), $filter (`A eq 'a1' and B eq
'b1' or B eq 'b2' and C eq '*'`: `or` only between values of one dimension; a named dimension splits
the series, the others are aggregated), timespan, interval (default PT1M, FULL), aggregation, top (the
series per metric once a filter is given, default 10), ValidateDimensions (default true: a filter on a
dimension the metric lacks is a 400). The metric names and their dimensions are those of Azure Monitor's
"Supported metrics for Microsoft.MachineLearningServices/workspaces" page: the current ones (RunId,
InstanceId, DeviceId) and the older ones (runId, NodeId, DeviceId). Dimension names compare
case-insensitively and are answered in lower case, as the example's `tier` for `Tier`.
"""
from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

_GPU_DIMS = ("RunId", "InstanceId", "DeviceId", "ComputeName")
_NODE_DIMS = ("RunId", "InstanceId", "ComputeName")
_OLD_GPU_DIMS = ("Scenario", "runId", "NodeId", "DeviceId", "ClusterName")
_OLD_NODE_DIMS = ("Scenario", "runId", "NodeId", "ClusterName")
# name -> (unit, dimensions, display name)
METRICS: Dict[str, Tuple[str, Tuple[str, ...], str]] = {
    "GpuUtilizationPercentage": ("Percent", _GPU_DIMS, "GPU Utilization Percentage"),
    "GpuMemoryUtilizationMegabytes": ("Count", _GPU_DIMS, "GPU Memory Utilization Megabytes"),
    "GpuEnergyJoules": ("Count", _GPU_DIMS, "GPU Energy in Joules"),
    "CpuUtilizationPercentage": ("Percent", _NODE_DIMS, "CPU Utilization Percentage"),
    "IBTransmitMegabytes": ("Count", _NODE_DIMS, "IB Transmit Megabytes"),
    "IBReceiveMegabytes": ("Count", _NODE_DIMS, "IB Receive Megabytes"),
    "DiskUsedMegabytes": ("Count", _NODE_DIMS, "Disk Used Megabytes"),
    "GpuUtilization": ("Percent", _OLD_GPU_DIMS, "GpuUtilization"),
    "GpuMemoryUtilization": ("Percent", _OLD_GPU_DIMS, "GpuMemoryUtilization"),
    "CpuUtilization": ("Percent", _OLD_NODE_DIMS, "CpuUtilization"),
}
NAMING = {"current": {"gpu_util": "GpuUtilizationPercentage", "gpu_mem": "GpuMemoryUtilizationMegabytes",
                      "gpu_energy": "GpuEnergyJoules", "cpu_util": "CpuUtilizationPercentage",
                      "ib_tx": "IBTransmitMegabytes", "ib_rx": "IBReceiveMegabytes", "disk_used": "DiskUsedMegabytes"},
          "legacy": {"gpu_util": "GpuUtilization", "gpu_mem_pct": "GpuMemoryUtilization", "cpu_util": "CpuUtilization"}}
_AGGS = ("average", "minimum", "maximum", "total", "count")
_CLAUSE = re.compile(r"^\s*(?P<dim>[A-Za-z0-9_]+)\s+eq\s+'(?P<val>(?:[^']|'')*)'\s*$", re.IGNORECASE)


class BadRequest(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _parse_time(text: str) -> datetime:
    t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _grain(text: str, span: timedelta) -> timedelta:
    if text.upper() == "FULL":
        return span
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?", text.upper()) or re.fullmatch(r"P(\d+)D()", text.upper())
    if not m or not any(m.groups()):
        raise BadRequest(f"Invalid interval '{text}'.")
    if text.upper().startswith("P") and "T" not in text.upper():
        return timedelta(days=int(m.group(1)))
    return timedelta(hours=int(m.group(1) or 0), minutes=int(m.group(2) or 0))


def parse_filter(text: str) -> Dict[str, List[str]]:
    """`A eq 'a1' and B eq 'b1' or B eq 'b2'` -> {"a": ["a1"], "b": ["b1", "b2"]} (names lower case)."""
    out: Dict[str, List[str]] = {}
    for clause in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE) if text.strip() else []:
        dims = set()
        for part in re.split(r"\s+or\s+", clause, flags=re.IGNORECASE):
            m = _CLAUSE.match(part)
            if not m:
                raise BadRequest(f"Invalid $filter: '{part.strip()}'.")
            dims.add(m.group("dim").lower())
            out.setdefault(m.group("dim").lower(), []).append(m.group("val").replace("''", "'"))
        if len(dims) > 1:
            raise BadRequest("Invalid $filter: the or operator cannot separate two different dimensions.")
    return out


class MonitorMetrics:
    """The workspace's job metrics: what `record` put in, answered as Metrics_List does."""

    def __init__(self) -> None:
        self._points: List[Tuple[str, Dict[str, str], datetime, float]] = []   # (metric, dims lower, t, value)
        self._lock = threading.Lock()
        self.queries: List[Dict[str, str]] = []

    def record(self, metric: str, dims: Dict[str, str], t: datetime, value: float) -> None:
        with self._lock:
            self._points.append((metric, {k.lower(): v for k, v in dims.items()}, t, float(value)))

    def record_job(self, run: str, *, nodes: int, gpus: int, start: datetime, minutes: int, naming: str = "current",
                   values: Optional[Dict[str, Callable[[int, int, int], Optional[float]]]] = None,
                   compute: str = "gpu-cluster") -> List[str]:
        """A job's metrics as Azure ML records them: `values` maps dtrain's metric name to f(node, device,
        minute) (device -1 for a node-level metric); per-GPU metrics for each of `gpus` devices of each of
        `nodes` nodes, one point a minute. Returns the node ids (InstanceId, or NodeId for "legacy")."""
        names = NAMING[naming]
        node_ids = [f"tvmps_{run[:8]}_{k}_d" if naming == "current" else f"{k:04d}" for k in range(nodes)]
        for ours, fn in (values or {}).items():
            metric = names.get(ours)
            if metric is None:
                continue
            per_gpu = "DeviceId" in METRICS[metric][1]
            for k, node in enumerate(node_ids):
                for dev in (range(gpus) if per_gpu else [-1]):
                    for minute in range(minutes):
                        v = fn(k, dev, minute)
                        if v is None:
                            continue
                        dims = ({"RunId": run, "InstanceId": node, "ComputeName": compute} if naming == "current"
                                else {"runId": run, "NodeId": node, "ClusterName": compute, "Scenario": "Job"})
                        if per_gpu:
                            dims["DeviceId"] = str(dev)
                        self.record(metric, dims, start + timedelta(minutes=minute), v)
        return node_ids

    # -- Metrics_List --------------------------------------------------------------------------------
    def dispatch(self, query: Dict[str, str], resource_id: str, region: str) -> Tuple[int, Dict[str, str], bytes]:
        self.queries.append(dict(query))
        if not query.get("api-version"):
            return _error(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required.")
        try:
            body = self._answer(query, resource_id, region)
        except BadRequest as exc:
            return _error(400, "BadRequest", exc.message)
        return 200, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(body).encode()

    def _answer(self, query: Dict[str, str], resource_id: str, region: str) -> Dict[str, Any]:
        names = [n for n in (query.get("metricnames") or "").split(",") if n]
        if len(names) > 20:
            raise BadRequest("At most 20 metric names can be specified.")
        for n in names:
            if n not in METRICS:
                raise BadRequest(f"Failed to find metric configuration for provider: Microsoft.MachineLearningServices, "
                                 f"resource Type: workspaces, metric: {n}, Valid metrics: {', '.join(METRICS)}")
        now = datetime.now(timezone.utc).replace(microsecond=0)
        if query.get("timespan"):
            try:
                start, end = (_parse_time(p) for p in query["timespan"].split("/"))
            except ValueError:
                raise BadRequest(f"Invalid timespan '{query['timespan']}'.") from None
        else:
            start, end = now - timedelta(hours=1), now
        grain = _grain(query.get("interval") or "PT1M", end - start)
        aggs = [a.strip().lower() for a in (query.get("aggregation") or "average").split(",") if a.strip()]
        if any(a not in _AGGS for a in aggs):
            raise BadRequest(f"Invalid aggregation '{query.get('aggregation')}'.")
        flt = parse_filter(query.get("$filter") or "")
        validate = (query.get("ValidateDimensions") or "true").lower() != "false"
        top = int(query.get("top") or 10) if flt else None
        value = [self._metric(n, flt, validate, start, end, grain, aggs, top, resource_id) for n in names]
        return {"cost": len(value) * 60, "timespan": f"{_iso(start)}/{_iso(end)}", "interval": query.get("interval") or "PT1M",
                "value": value, "namespace": "microsoft.machinelearningservices/workspaces", "resourceregion": region}

    def _metric(self, name: str, flt: Dict[str, List[str]], validate: bool, start: datetime, end: datetime,
                grain: timedelta, aggs: List[str], top: Optional[int], resource_id: str) -> Dict[str, Any]:
        unit, dims, display = METRICS[name]
        have = {d.lower(): d for d in dims}
        if validate:
            for d in flt:
                if d not in have:
                    raise BadRequest(f"Metric {name} has no dimension '{d}'.")
        split = [d for d in flt if d in have]
        groups: Dict[Tuple[str, ...], Dict[datetime, List[float]]] = {}
        with self._lock:
            points = [p for p in self._points if p[0] == name]
        for _, pdims, t, v in points:
            if not start <= t < end:
                continue
            if any(vals != ["*"] and "*" not in vals and pdims.get(d) not in vals for d, vals in flt.items() if d in have):
                continue
            key = tuple(pdims.get(d, "") for d in split)
            bucket = start + ((t - start) // grain) * grain
            groups.setdefault(key, {}).setdefault(bucket, []).append(v)
        series = []
        for key in sorted(groups)[: top if top is not None else 10]:
            buckets = groups[key]
            data = []
            t = min(buckets)
            while t <= max(buckets):
                vals = buckets.get(t)
                data.append({"timeStamp": _iso(t), **({a: _agg(a, vals) for a in aggs} if vals else {})})
                t += grain
            series.append({"metadatavalues": [{"name": {"value": d, "localizedValue": d}, "value": v}
                                              for d, v in zip(split, key)], "data": data})
        return {"id": f"{resource_id}/providers/Microsoft.Insights/metrics/{name}", "type": "Microsoft.Insights/metrics",
                "name": {"value": name, "localizedValue": display}, "displayDescription": display, "unit": unit,
                "timeseries": series, "errorCode": "Success"}


def _agg(kind: str, vals: List[float]) -> float:
    if kind == "average":
        return sum(vals) / len(vals)
    if kind == "total":
        return sum(vals)
    if kind == "count":
        return float(len(vals))
    return min(vals) if kind == "minimum" else max(vals)


def _error(status: int, code: str, message: str) -> Tuple[int, Dict[str, str], bytes]:
    # ErrorResponse of commonMonitoringTypes.json: {"code", "message"}
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps({"code": code, "message": message}).encode()
