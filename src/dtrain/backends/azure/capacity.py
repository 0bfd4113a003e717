"""Will the job start, and if not yet, why: the target compute and the subscription's vCPU quota, read before
submit and while a job waits (docs/capacity.md).

Two reads, both through azure-ai-ml's HTTP pipeline: the compute resource (Compute_Get: vmSize, vmPriority,
scaleSettings, allocationState, current/target node counts, nodeStateCounts, errors) and the subscription's
usages in the workspace's region (Usages_List, machineLearningServices.json: currentValue and limit in
vCPUs per VM family and in total). The checks themselves are pure functions of what was read (`findings`,
`waiting`), so each says which number came from where.

- refuse (exit 2, before any upload or PUT): more nodes than the cluster's maxNodeCount; a VM size other
  than the cluster's; more vCPUs than the family's or the region's quota limit;
- warn (submit goes on, the job will wait): quota left below what the job needs while other jobs hold it;
  the cluster at its maximum with every node busy; an allocation error on the cluster.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ...spec.model import compute_name
from ...spec.vmsizes import lookup
from ...timestamps import parse_time

# dtrain's VM families (spec/vmsizes.py) -> the family in Azure's quota names ("Standard NDSH100v5 Family
# Cluster Dedicated vCPUs"): Azure's compute family names, as the portal's quota page lists them.
QUOTA_FAMILY = {
    "NC v3": "NCSv3", "NC T4 v3": "NCASv3_T4", "NC A100 v4": "NCADSA100v4", "NC H100 v5": "NCADSH100v5",
    "NCC H100 v5": "NCCADSH100v5", "NV A10 v5": "NVADSA10v5", "ND v2": "NDSv2", "ND A100 v4": "NDASv4_A100",
    "NDm A100 v4": "NDAMSv4_A100", "ND H100 v5": "NDSH100v5", "ND H200 v5": "NDSH200v5",
    "ND MI300X v5": "NDISMI300Xv5", "ND GB200 v6": "NDGB200v6",
}
WAITING = ("NotStarted", "Starting", "Provisioning", "Preparing", "Queued")
MAX_LISTED = 500      # jobs read to count those queued ahead (the Jobs list pages; no compute/status filter)


@dataclass
class Compute:
    name: str
    vm_size: str
    priority: str                  # Dedicated | LowPriority
    min_nodes: int
    max_nodes: int
    allocation_state: str          # Steady | Resizing
    since: str | None              # allocationStateTransitionTime
    current: int
    target: int
    states: dict = field(default_factory=dict)     # nodeStateCounts
    errors: list = field(default_factory=list)     # the service's error messages (untrusted text)
    kind: str = "AmlCompute"

    @classmethod
    def from_rest(cls, name: str, body: dict) -> "Compute":
        outer = body.get("properties") or {}
        p = outer.get("properties") or {}
        scale = p.get("scaleSettings") or {}
        errors = [_error_text(e) for e in (p.get("errors") or []) + (outer.get("provisioningErrors") or [])]
        return cls(name=name, vm_size=str(p.get("vmSize") or ""), priority=str(p.get("vmPriority") or "Dedicated"),
                   min_nodes=int(scale.get("minNodeCount") or 0), max_nodes=int(scale.get("maxNodeCount") or 0),
                   allocation_state=str(p.get("allocationState") or ""), since=p.get("allocationStateTransitionTime"),
                   current=int(p.get("currentNodeCount") or 0), target=int(p.get("targetNodeCount") or 0),
                   states=dict(p.get("nodeStateCounts") or {}), errors=[e for e in errors if e],
                   kind=str(outer.get("computeType") or ""))

    @property
    def where(self) -> str:
        return f"GET computes/{self.name}"


def _error_text(e) -> str:
    inner = (e or {}).get("error") if isinstance(e, dict) and isinstance(e.get("error"), dict) else e
    if not isinstance(inner, dict):
        return str(inner or "")
    code, msg = inner.get("code"), str(inner.get("message") or "")
    return f"{msg} ({code})" if code and code not in msg else msg or str(code or "")


@dataclass
class Usage:
    name: str                      # "Standard NDSH100v5 Family Cluster Dedicated vCPUs"
    kind: str                      # the usage's type, e.g. Microsoft.MachineLearningServices/vmFamily/usages
    current: int
    limit: int


@dataclass
class Finding:
    level: str                     # refuse | warn
    text: str

    def to_dict(self) -> dict:
        return {"level": self.level, "text": self.text}


def _pick(entity, snake: str, camel: str):
    """An azure-ai-ml entity's field: azure-ai-ml 1.35's Usage and VmSize _from_rest_object copy the REST
    model's as_dict() (camelCase keys) into the entity, so the snake_case attribute stays None."""
    v = getattr(entity, snake, None)
    return (vars(entity) if hasattr(entity, "__dict__") else {}).get(camel) if v is None else v


def _family(text) -> str:
    m = re.fullmatch(r"(?i)standard(.+?)family", str(text or ""))
    return m.group(1) if m else str(text or "")


def _usage(u) -> Usage:
    """An azure-ai-ml Usage entity as read (both spellings: _pick)."""
    limit = _pick(u, "limit", "limit")
    return Usage(name=_usage_name(_pick(u, "name", "name")), kind=str(_pick(u, "type", "type") or ""),
                 current=int(_pick(u, "current_value", "currentValue") or 0), limit=-1 if limit is None else int(limit))


def _usage_name(name) -> str:
    """The SDK's Usage.name: a UsageName, or the REST dict {"value", "localizedValue"} as it is today."""
    if isinstance(name, dict):
        return str(name.get("value") or name.get("localizedValue") or "")
    return str(getattr(name, "value", None) or name or "")


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def size_facts(vm_size: str, sizes: dict | None, region: str) -> tuple[str, int, str, str | None] | None:
    """(name, vCPUs, where the vCPUs come from, quota family) of a VM size: the region's VirtualMachineSizes
    list where it was read, else dtrain's VM size table and QUOTA_FAMILY; None when neither knows it."""
    known = lookup(vm_size)
    name = known.name if known else vm_size
    svc = (sizes or {}).get(vm_size.lower())
    if svc and svc[1]:
        return name, svc[1], f"VM sizes list for {region}", svc[0] or (QUOTA_FAMILY.get(known.family) if known else None)
    if known is None:
        return None
    return name, known.vcpus, "dtrain's VM size table", QUOTA_FAMILY.get(known.family)


def quota_for(usages: list, family: str | None, low_priority: bool) -> tuple[Usage | None, Usage | None]:
    """(the family's usage, the region's total) in the Usages list."""
    tier = "lowpriority" if low_priority else "dedicated"
    fam = total = None
    for u in usages:
        n = _norm(u.name)
        if family and u.kind.endswith("vmFamily/usages") and n == f"standard{_norm(family)}familycluster{tier}vcpus":
            fam = u
        elif u.kind.endswith(("lowPriorityCores/usages" if low_priority else "dedicatedCores/usages")):
            total = u
    return fam, total


def findings(*, vm_size: str | None, nodes: int, compute: Compute | None, usages: list | None,
             region: str, spec_vm_size: str | None = None, low_priority: bool = False,
             sizes: dict | None = None) -> list:
    """What stops or delays a job of `nodes` x `vm_size` on `compute` (None: serverless) with these usages;
    `sizes`: the region's VirtualMachineSizes list (Reader.sizes), where read."""
    out: list[Finding] = []
    if compute is not None:
        out += _cluster_findings(compute, nodes, spec_vm_size)
        vm_size = compute.vm_size or vm_size
        low_priority = compute.priority.lower() == "lowpriority"
    facts = size_facts(vm_size, sizes, region) if vm_size else None
    if facts is None or usages is None:
        return out
    name, vcpus, vcpu_src, family = facts
    idle = int(compute.states.get("idleNodeCount") or 0) if compute else 0
    need_all, need_new = nodes * vcpus, max(0, nodes - idle) * vcpus
    fam, total = quota_for(usages, family, low_priority)
    src = f"Usages list for {region}"
    for u, label in ((fam, f"{family} family"), (total, "regional total")):
        if u is None or u.limit < 0:            # -1: no limit of its own (the example's LowPriority families)
            continue
        what = f"{nodes} x {name} need {need_all} vCPUs ({vcpus} each: {vcpu_src})"
        if need_all > u.limit:
            out.append(Finding("refuse", f"{what}, above the {label} quota limit of {u.limit} vCPUs "
                                         f"('{u.name}', {src}): the job can never start"))
        elif u.current + need_new > u.limit:
            out.append(Finding("warn", f"quota: {u.current} of {u.limit} vCPUs of {label} in use ('{u.name}', "
                                       f"{src}); {what}: it waits until {u.current + need_new - u.limit} are freed"))
    if fam is None and family:
        out.append(Finding("warn", f"no {family} family quota in the Usages list for {region}: quota not checked"))
    return out


def _cluster_findings(c: Compute, nodes: int, spec_vm_size: str | None) -> list:
    out: list = []
    if c.kind and c.kind != "AmlCompute":
        return out
    if c.max_nodes and nodes > c.max_nodes:
        out.append(Finding("refuse", f"resources.instance_count {nodes} is more than cluster {c.name}'s maximum of "
                                     f"{c.max_nodes} nodes (scaleSettings.maxNodeCount, {c.where}): the job can never "
                                     "start"))
    if spec_vm_size and c.vm_size and spec_vm_size.lower() != c.vm_size.lower():
        out.append(Finding("refuse", f"resources.instance_type {spec_vm_size} is not cluster {c.name}'s VM size "
                                     f"{c.vm_size} (vmSize, {c.where})"))
    busy = int(c.states.get("runningNodeCount") or 0) + int(c.states.get("preparingNodeCount") or 0)
    if c.max_nodes and c.current >= c.max_nodes and busy >= c.max_nodes:
        out.append(Finding("warn", f"cluster {c.name} is at its maximum of {c.max_nodes} nodes, all busy "
                                   f"(nodeStateCounts, {c.where}): the job waits for them"))
    for e in c.errors[:3]:
        out.append(Finding("warn", f"cluster {c.name} reports an allocation error: {e} ({c.where})"))
    return out


def waiting(status: str, compute: Compute | None, usages: list | None, *, vm_size: str | None, nodes: int,
            region: str, now: datetime | None = None, sizes: dict | None = None, image_build: str | None = None,
            ahead: tuple[int, bool] | None = None) -> str | None:
    """One short reason why a Queued/Preparing job is not running yet, from the same reads; `image_build`:
    the image build log the run lists while Preparing (Reader.image_build); `ahead`: (jobs queued before it
    on a full cluster, whether the count stopped at the listing's cap) (Reader.ahead)."""
    if status not in WAITING:
        return None
    if image_build and status == "Preparing":
        return f"building the environment image ({image_build})"
    if compute is not None:
        if compute.errors:
            return f"allocation failed: {compute.errors[0]}"
        if compute.allocation_state.lower() == "resizing":
            return f"cluster resizing {compute.current} -> {compute.target} nodes{_since(compute.since, now)}"
        if at_max(compute):
            return f"cluster at max {compute.max_nodes} nodes, all running other jobs{_ahead(ahead)}"
    for f in findings(vm_size=(compute.vm_size if compute else None) or vm_size, nodes=nodes, compute=None,
                      usages=usages, region=region, sizes=sizes,
                      low_priority=bool(compute and compute.priority.lower() == "lowpriority")):
        if f.text.startswith("quota: "):
            return f.text.split(" ('")[0]          # "quota: 20 of 24 vCPUs of NCADSH100v5 family in use"
        if f.level == "refuse":                     # submitted elsewhere, or the quota was lowered since
            return "quota: " + f.text.split(" ('")[0]
    return None                                  # nothing read explains it


def at_max(compute: Compute) -> bool:
    return bool(compute.max_nodes) and int(compute.states.get("runningNodeCount") or 0) >= compute.max_nodes


def _ahead(ahead: tuple[int, bool] | None) -> str:
    if ahead is None:
        return ""
    n, capped = ahead
    if n == 0:
        return f"; jobs ahead not known (more than {MAX_LISTED} active jobs to list)" if capped else "; first in line"
    return f"; {'at least ' if capped else ''}{n} job{'s' if n != 1 else ''} ahead"


def image_build_log(log_files: dict) -> str | None:
    """The image build log a run lists (azureml-logs/20_image_build_log*.txt, Azure ML's Docker build log) while
    no later log exists yet (55_azureml-execution, 65_job_prep, 70_driver_log, user_logs/): the build is on."""
    names = sorted(str(n) for n in log_files or {})
    build = next((n for n in names if re.search(r"(^|/)20_image_build_log[^/]*\.txt$", n)), None)
    later = any(re.search(r"(^|/)(5[5-9]|[6-9]\d)_[^/]*\.txt$", n) or n.startswith("user_logs/") for n in names)
    return None if later else build


def _since(ts: str | None, now: datetime | None) -> str:
    t = parse_time(ts)
    if t is None:
        return ""
    mins = max(0, int(((now or datetime.now(timezone.utc)) - t).total_seconds() // 60))
    return f" ({mins} min)"


# --- the reads (azure-ai-ml, lazily) ------------------------------------------------------------------
class Reader:
    """Reads a compute, the region's usages, a run's image build and the queue on a cluster through an MLClient,
    each at most once per `ttl` seconds (a waiting job is polled every few seconds; the cluster's state is worth
    a read twice a minute)."""

    def __init__(self, ml, workspace_name: str, ttl: float = 30.0):
        self.ml, self.workspace_name, self.ttl = ml, workspace_name, ttl
        self._region: str | None = None
        self._sizes: dict | None = None
        self._reads: dict = {}                   # what was read, by key -> (when, value): compute, quota, queue

    def region(self) -> str:
        if self._region is None:
            self._region = str(self.ml.workspaces.get(self.workspace_name).location or "").lower()
        return self._region

    def compute(self, name: str) -> Compute | None:
        from . import sdk

        def read():
            body = sdk.compute_rest(self.ml, name)
            return Compute.from_rest(name, body) if body else None
        return self._cached("compute:" + name, read)

    def sizes(self) -> dict:
        """VM size (lower case) -> (quota family, vCPUs) as the region's VirtualMachineSizes list says
        ("standardNCASv3_T4Family" -> "NCASv3_T4"); {} where it cannot be read (then dtrain's own tables)."""
        if self._sizes is None:
            try:
                self._sizes = {str(_pick(v, "name", "name")).lower(): (_family(_pick(v, "family", "family")),
                                                                      int(_pick(v, "v_cp_us", "vCPUs") or 0))
                               for v in self.ml.compute.list_sizes(location=self.region())}
            except Exception:                    # an explanation aid: never the reason a check fails
                self._sizes = {}
        return self._sizes

    def _cached(self, key: str, read):
        hit = self._reads.get(key)
        if hit and time.monotonic() - hit[0] < self.ttl:
            return hit[1]
        value = read()
        self._reads[key] = (time.monotonic(), value)
        return value

    def image_build(self, job: str) -> str | None:
        """The image build log the job's run lists while it builds (run details' logFiles), else None."""
        from . import sdk
        from .jobinfo import as_dict

        def read():
            rd = as_dict(sdk.run_details(self.ml.jobs, job))
            return image_build_log(rd.get("logFiles") or rd.get("log_files") or {})
        return self._cached("build:" + job, read)

    def ahead(self, compute: str, job: str, created: str | None) -> tuple[int, bool]:
        """(How many jobs wait on the compute that were created before `job`, whether the listing stopped at
        MAX_LISTED): the Jobs list has no compute or status filter, so the workspace's active jobs are read, at
        most MAX_LISTED of them, once per `ttl` for every waiting job on that compute."""
        from .jobinfo import created_at, status_text

        def read():
            waiting: list = []
            seen = 0
            for j in self.ml.jobs.list():         # ActiveOnly, as az ml job list
                seen += 1
                if seen > MAX_LISTED:
                    return waiting, True
                if j is not None and compute_name(getattr(j, "compute", None)) == compute \
                        and status_text(getattr(j, "status", None)) in WAITING:
                    waiting.append((j.name, created_at(j)))
            return waiting, False
        queued, capped = self._cached("queue:" + compute, read)
        mine = next((t for n, t in queued if n == job), None) or parse_time(created)
        return sum(1 for n, t in queued if n != job and (mine is None or t < mine)), capped

    def usages(self) -> list:
        return self._cached("usages", lambda: [_usage(u) for u in self.ml.compute.list_usage(location=self.region())])


# --- what the backend calls -------------------------------------------------------------------------


def preflight(reader: Reader, body: dict, tell) -> None:
    """Before anything is uploaded or created: refuse (UsageError, exit 2) a job that can never start; tell
    what will make it wait. A read that fails is said and skipped: the service decides then."""
    from ...errors import UsageError

    res = body.get("resources") or {}
    nodes, spec_size = int(res.get("instanceCount") or 1), res.get("instanceType")
    name = compute_name(body.get("computeId"))
    try:
        compute = reader.compute(name) if name else None
        if name and compute is None:
            return                               # no such compute: the PUT's own error names it
        usages, region = reader.usages(), reader.region()
    except Exception as exc:                     # quota reads need subscription-level read access
        tell(f"capacity: not checked before submit (could not read the compute or quota: {type(exc).__name__})")
        return
    low = bool(compute and compute.priority.lower() == "lowpriority") or \
        str((body.get("queueSettings") or {}).get("jobTier") or "").lower() == "spot"
    found = findings(vm_size=spec_size, nodes=nodes, compute=compute, usages=usages, region=region,
                     spec_vm_size=spec_size, low_priority=low, sizes=reader.sizes())
    refused = [f.text for f in found if f.level == "refuse"]
    if refused:
        raise UsageError("; ".join(refused) + "; nothing was submitted",
                         hint="lower resources.instance_count, use the cluster's VM size, pick another compute, or "
                              "ask for more quota (Azure portal > Quotas > Machine learning); docs/capacity.md")
    for f in found:
        if name and f.text.startswith(f"cluster {name} is at its maximum"):
            ahead = _quiet(lambda: reader.ahead(name, "", None))      # none of it is ours yet: all are ahead
            f.text += f" ({_ahead(ahead).lstrip('; ')} in the Jobs list)" if ahead else ""
        tell(f"capacity: {f.text}")


def annotate(reader: Reader, info, props: dict) -> None:
    """The VM size a job's nodes are (its cost is priced by it), and why it waits while it does; never
    fails a status read."""
    res = props.get("resources") or {}
    name = compute_name(props.get("computeId"))
    try:
        info.region = reader.region()            # one workspace read per backend: the job's prices are its region's
        compute = reader.compute(name) if name and (not info.instance_type or info.status in WAITING) else None
        if compute is not None and compute.vm_size and not res.get("instanceType"):
            size = lookup(compute.vm_size)
            info.instance_type = size.name if size else compute.vm_size
        if not info.terminal and info.status in WAITING:
            build = _quiet(lambda: reader.image_build(info.name)) if info.status == "Preparing" else None
            ahead = _quiet(lambda: reader.ahead(name, info.name, info.created)) \
                if name and compute and at_max(compute) else None
            info.waiting = waiting(info.status, compute, reader.usages(), vm_size=info.instance_type,
                                   nodes=info.nodes, region=reader.region(), sizes=reader.sizes(),
                                   image_build=build, ahead=ahead)
    except Exception:                            # capacity is an explanation, not the job's status
        return


def _quiet(read):
    """A read that only sharpens the reason (image build, jobs ahead): None where it fails."""
    try:
        return read()
    except Exception:
        return None
