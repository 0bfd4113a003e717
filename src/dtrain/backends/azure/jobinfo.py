"""What the service says of a job, as dtrain's JobInfo: the REST job (JobBase, as Jobs_Get returns it) and
azure-ai-ml's entities (what jobs.list returns), their shape (nodes, processes, a TensorFlow job's workers),
time limit, times and error text. Pure conversions: no SDK import, no request."""
from __future__ import annotations

import re
from datetime import datetime, timezone

from ...spec.model import Distribution
from ...timestamps import parse_time
from ...untrusted import redact
from ..base import JobInfo
from .services import job_services


def iso(v) -> str | None:
    """A time as JobInfo holds it: ISO 8601 in UTC, to the millisecond."""
    if v is None:
        return None
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return v.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return str(v)


def status_text(s) -> str:
    return str(getattr(s, "value", s)) if s is not None else "Unknown"


def as_dict(obj) -> dict:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    for attr in ("as_dict", "serialize"):
        fn = getattr(obj, attr, None)
        if callable(fn):
            try:
                return fn()
            except Exception:  # pragma: no cover - a model that cannot serialise itself
                continue
    try:
        return dict(obj)
    except (TypeError, ValueError):
        return {}


_REST_DISTRIBUTION = {"PyTorch": "pytorch", "Mpi": "mpi", "TensorFlow": "tensorflow", "Ray": "ray"}


def rest_distribution(props: dict) -> Distribution | None:
    """The job's distribution as the spec layer models it, from Azure's REST shape (None without one)."""
    dist = props.get("distribution") or {}
    kind = _REST_DISTRIBUTION.get(str(dist.get("distributionType")))
    if kind is None:
        return None
    return Distribution(type=kind, process_count_per_instance=dist.get("processCountPerInstance"),
                        worker_count=dist.get("workerCount"),
                        parameter_server_count=int(dist.get("parameterServerCount") or 0))


def entity_distribution(job) -> Distribution | None:
    """The same from an azure-ai-ml job entity (what `jobs.list` returns)."""
    dist = getattr(job, "distribution", None)
    kind = str(getattr(dist, "type", "") or "").lower()
    if dist is None or kind not in _REST_DISTRIBUTION.values():
        return None
    return Distribution(type=kind, process_count_per_instance=getattr(dist, "process_count_per_instance", None),
                        worker_count=getattr(dist, "worker_count", None),
                        parameter_server_count=int(getattr(dist, "parameter_server_count", None) or 0))


def shape_of(nodes: int, d: Distribution | None) -> tuple[int, int, int]:
    """(nodes, processes per node, processes in all) by the spec layer's one rule (Distribution): a
    TensorFlow job's parameter servers count, and a job without a distribution runs once per node."""
    if d is None:
        return nodes, 1, nodes
    return nodes, d.processes_per_node(nodes), d.process_count(nodes)


def tf_workers(props: dict) -> int | None:
    """A TensorFlow job's worker count (its parameter servers' ranks come after the workers); None otherwise."""
    d = rest_distribution(props)
    if d is None or d.type != "tensorflow":
        return None
    return d.workers(int((props.get("resources") or {}).get("instanceCount") or 1))


def rest_shape(props: dict) -> tuple[int, int]:
    """(nodes, processes per node) of a job as Azure returns it, counted as the spec layer counts."""
    nodes = int((props.get("resources") or {}).get("instanceCount") or 1)
    n, ppn, _ = shape_of(nodes, rest_distribution(props))
    return n, ppn


def timeout_seconds(props: dict) -> float | None:
    t = (props.get("limits") or {}).get("timeout")
    if not t:
        return None
    if isinstance(t, (int, float)):
        return float(t)
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?)?", str(t))
    if not m:
        return None
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s


def trim_lines(text: str) -> str:
    """Text without its leading and trailing blank lines: run history's error message starts with a newline
    ("\nError Code: ScriptExecution...\nNative Error: ..."), which would print `failed: ` on a line of its own."""
    lines = text.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def error_message(err) -> str | None:
    d = as_dict(err)
    inner = d.get("error") if isinstance(d.get("error"), dict) else d
    if not inner:
        return None
    msg = trim_lines(redact(str(inner.get("message") or inner.get("code") or ""))) or None   # the service's text
    code = inner.get("code")
    if msg and code and code not in msg:
        return f"{msg} ({code})"
    return msg


def info_from_rest(raw: dict, backend: str) -> JobInfo:
    """A job as the REST API returns it (JobBase with systemData), as dtrain's JobInfo."""
    props = raw.get("properties") or {}
    nodes, ppn = rest_shape(props)
    sysd = raw.get("systemData") or raw.get("system_data") or {}
    studio = ((props.get("services") or {}).get("Studio") or {}).get("endpoint")
    return JobInfo(name=str(raw.get("name") or ""), backend=backend, status=status_text(props.get("status")),
                   display_name=props.get("displayName"), experiment_name=props.get("experimentName"),
                   created=iso(parse_time(sysd.get("createdAt"))), nodes=nodes, processes_per_node=ppn,
                   url=studio, tags=dict(props.get("tags") or {}), description=props.get("description"),
                   archived=bool(props.get("isArchived")), services=job_services(props),
                   instance_type=(props.get("resources") or {}).get("instanceType"))


def info_from_entity(job, backend: str) -> JobInfo:
    """A job as azure-ai-ml's jobs.list gives it (an entity), as dtrain's JobInfo."""
    nodes = int(getattr(getattr(job, "resources", None), "instance_count", None) or 1)
    _, ppn, _ = shape_of(nodes, entity_distribution(job))
    created = getattr(getattr(job, "creation_context", None), "created_at", None)
    return JobInfo(name=job.name, backend=backend, status=status_text(job.status),
                   display_name=job.display_name, experiment_name=job.experiment_name,
                   created=iso(parse_time(created)), nodes=int(nodes), processes_per_node=int(ppn),
                   url=getattr(job, "studio_url", None), tags=dict(job.tags or {}),
                   description=getattr(job, "description", None),
                   instance_type=getattr(getattr(job, "resources", None), "instance_type", None))


def listed(job, experiment: str | None, tags: dict, wanted: set | None) -> bool:
    """Whether a listed job is one asked for (a wanted name is struck off once seen)."""
    if wanted is not None:
        if job.name not in wanted:
            return False
        wanted.discard(job.name)
    if experiment and job.experiment_name != experiment:
        return False
    jt = job.tags or {}
    return not any(k not in jt or (v not in (None, "") and str(jt[k]) != str(v)) for k, v in tags.items())


def created_at(job) -> datetime:
    """A listed job's creation time (the oldest possible when the service gave none)."""
    created = parse_time(getattr(getattr(job, "creation_context", None), "created_at", None))
    return created or datetime.min.replace(tzinfo=timezone.utc)
