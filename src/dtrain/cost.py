"""What a job will cost (before) and did cost (after): price per node-hour x nodes x hours.

Pure arithmetic over a Price (prices.py) and numbers the caller has: the spec's node count and time limit
(or --hours), or a job's measured start and end. Azure ML bills a cluster's nodes per second while they are
allocated; dtrain counts the job's run time, which leaves out node start-up and the idle time before a
cluster scales down, and says so. A local run is priced as its VM size would be on Azure, marked as such.
Imports no backend.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UsageError
from .prices import Lookup, Price, find, when
from .spec.model import JobSpec, compute_name
from .timestamps import parse_time

DEFAULT_REGION = "eastus"
RUN_TIME_ONLY = ("run time only: node start-up, image builds and the idle minutes before a cluster scales down "
                 "are billed too")


@dataclass
class Estimate:
    vm_size: str
    nodes: int
    hours: float
    hours_from: str            # "--hours" | "limits.timeout"
    region: str
    region_from: str           # "--region" | "DTRAIN_REGION" | "default"
    tier: str
    price: Price | None
    notes: list = field(default_factory=list)
    local: bool = False        # a local run, priced as the VM size on Azure
    vm_size_from: str = "resources.instance_type"     # or "cluster NAME" (its vmSize, read from the workspace)

    @property
    def total(self) -> float | None:
        return None if self.price is None else round(self.price.per_hour * self.nodes * self.hours, 2)

    def to_dict(self) -> dict:
        return {"vm_size": self.vm_size, "vm_size_from": self.vm_size_from, "nodes": self.nodes, "hours": self.hours, "hours_from": self.hours_from,
                "region": self.region, "region_from": self.region_from, "tier": self.tier,
                "price_per_hour": self.price.per_hour if self.price else None,
                "price": self.price.to_dict() if self.price else None, "total": self.total,
                "currency": self.price.currency if self.price else "USD", "local": self.local, "notes": self.notes}

    def line(self) -> str:
        """One line: "2 x Standard_X x 1 h (--hours) at $98.32/h per node (source, date, age) = $196.64"."""
        size = self.vm_size + (f" ({self.vm_size_from})" if self.vm_size_from != "resources.instance_type" else "")
        what = f"{self.nodes} x {size} x {_hours(self.hours)} ({self.hours_from}) in {self.region}"
        if self.tier != "dedicated":
            what += f", {self.tier.replace('_', ' ')}"
        if self.price is None:
            return what + ": no price known (" + "; ".join(self.notes) + ")"
        mark = " if run on Azure ML (this is a local run)" if self.local else ""
        return f"{what} at {self.price.describe()} = ${self.total:,.2f}{mark}"


def _hours(h: float) -> str:
    return f"{h:g} h"


def region_of(region: str | None, workspace: str | None = None) -> tuple[str, str]:
    """--region, else DTRAIN_REGION, else the workspace's region where it was read, else the default."""
    if region:
        return region.strip().lower(), "--region"
    from .settings import current

    env = (current().given("DTRAIN_REGION") or "").strip().lower()
    if env:
        return env, "DTRAIN_REGION"
    if workspace:
        return workspace.lower(), "the workspace's"
    return current().text("DTRAIN_REGION") or DEFAULT_REGION, "default"


def tier_of(spec: JobSpec, tier: str | None) -> str:
    if tier:
        t = tier.strip().lower().replace("-", "_")
        if t not in ("dedicated", "low_priority"):
            raise UsageError(f"--tier must be dedicated or low_priority, not '{tier}'")
        return t
    job_tier = str(((spec.data.get("queue_settings") or {}).get("job_tier")) or "").lower()
    return "low_priority" if job_tier == "spot" else "dedicated"


def hours_of(spec: JobSpec, hours: float | None) -> tuple[float, str]:
    if hours is not None:
        if not hours > 0:
            raise UsageError(f"--hours must be more than 0, not {hours:g}")
        return float(hours), "--hours"
    if spec.timeout:
        return int(spec.timeout) / 3600.0, "limits.timeout"
    raise UsageError("the spec has no limits.timeout, so how long the job runs is not known",
                     hint="pass --hours H (dtrain does not guess a run time), or set limits.timeout in the spec")


def estimate(spec: JobSpec, *, hours: float | None = None, region: str | None = None, tier: str | None = None,
             vm_size: str | None = None, online: bool = False, local: bool = False, cluster=None) -> Estimate:
    """The estimate of one job. vm_size: the spec's resources.instance_type unless given. `cluster`: a
    function of a compute's name giving its (VM size, region) as the workspace has them, or None; asked for a
    spec that names a cluster and no instance_type (most Azure ML YAMLs: the nodes are the cluster's)."""
    size, size_from, ws_region = vm_size or spec.instance_type, "resources.instance_type", None
    name = compute_name(spec.compute)
    if not size and cluster is not None and name and not spec.is_local_compute:
        read = cluster(name)
        if read:
            (size, ws_region), size_from = read, f"cluster {name}"
    if not size:
        raise UsageError("the spec names no resources.instance_type, so its price is not known",
                         hint="set resources.instance_type to the cluster's VM size, or give the workspace "
                              "(--workspace, -g, --subscription) to read it from the cluster")
    h, h_from = hours_of(spec, hours)
    reg, reg_from = region_of(region, ws_region)
    t = tier_of(spec, tier)
    found: Lookup = find(size, reg, t, online=online)
    return Estimate(found.price.vm_size if found.price else size, spec.instance_count, h, h_from, reg, reg_from, t,
                    found.price, found.notes, local, size_from)


# --- after the job --------------------------------------------------------------------------------
def run_seconds(started: str | None, ended: str | None) -> float | None:
    s, e = parse_time(started), parse_time(ended)
    if s is None or e is None:
        return None
    if (s.tzinfo is None) != (e.tzinfo is None):
        s, e = s.replace(tzinfo=None), e.replace(tzinfo=None)
    return max(0.0, (e - s).total_seconds())


def spent(price: Price | None, nodes: int, started: str | None, ended: str | None) -> dict | None:
    """What a run cost from its measured start and end: None while it has not both."""
    secs = run_seconds(started, ended)
    if secs is None:
        return None
    total = None if price is None else round(price.per_hour * nodes * secs / 3600.0, 2)
    return {"seconds": round(secs, 3), "nodes": nodes, "total": total,
            "price_per_hour": price.per_hour if price else None, "currency": price.currency if price else "USD"}


def job_cost(info, *, region: str | None = None, tier: str | None = None) -> dict | None:
    """A job's cost from its JobInfo (its instance_type, nodes, started/ended); a retry chain's attempts one by
    one and in total. None when the job has no known VM size or has not run yet. Never asks the network."""
    size = getattr(info, "instance_type", None)
    if not size:
        return None
    reg, _ = region_of(region or getattr(info, "region", None))
    found = find(size, reg, tier or "dedicated", online=False)
    out: dict = {"vm_size": found.price.vm_size if found.price else size, "region": reg,
                 "price": found.price.to_dict() if found.price else None, "notes": found.notes,
                 "local": info.backend == "local", "basis": RUN_TIME_ONLY}
    attempts = (info.chain or {}).get("attempts") if getattr(info, "chain", None) else None
    if attempts:
        each = [dict(attempt=a["attempt"], name=a["name"], **(spent(found.price, info.nodes, a.get("started"),
                                                                       a.get("ended")) or {"seconds": None, "total": None}))
                for a in attempts]
        out["attempts"] = each
        totals = [a["total"] for a in each if a.get("total") is not None]
        out["total"] = round(sum(totals), 2) if totals or not each else None
        return out
    run = spent(found.price, info.nodes, info.started, info.ended)
    if run is None:
        return None
    out.update(run)
    return out


def cost_text(c: dict) -> str:
    """ "$12.34 (2 nodes x 3:46 at $98.32/h in eastus, Azure Retail Prices API, 2026-11-25, today; ...)" """
    price = c.get("price")
    if price is None:
        # one short line at the end of every job; the whole reason is `dtrain cost`'s (and -o json's)
        return "unknown: no price for this VM size in this region (the reason: `dtrain cost SPEC`; docs/capacity.md)"
    src = f"{price['source']}, {when(price['source'], price['as_of'], price.get('age_days', 0))}"
    mark = " if run on Azure ML (local run)" if c.get("local") else ""
    if "attempts" in c:
        parts = ", ".join(f"attempt {a['attempt']} ${a['total']:,.2f}" for a in c["attempts"] if a.get("total") is not None)
        return (f"${c['total']:,.2f} in total ({parts}) at ${price['per_hour']:,.4g}/h per node in {c['region']}{mark} "
                f"({src})")
    from .progress import clock

    return (f"${c['total']:,.2f}{mark} ({c['nodes']} node{'s' if c['nodes'] != 1 else ''} x {clock(c['seconds'])} "
            f"at ${price['per_hour']:,.4g}/h in {c['region']}, {src}; run time only: start-up and idle nodes are "
            "billed too)")


# --- many jobs, and the --max-cost gate -------------------------------------------------------------
def summary(estimates: list, names: list | None = None) -> dict:
    """Every job's estimate and the sum (None when a price is missing: a partial sum would understate)."""
    totals = [e.total for e in estimates]
    total = None if any(t is None for t in totals) else round(sum(totals), 2)   # type: ignore[arg-type]
    jobs = [dict(e.to_dict(), **({"name": n} if n else {})) for e, n in zip(estimates, names or [None] * len(estimates))]
    return {"jobs": jobs, "total": total, "currency": "USD"}


def check_max_cost(estimates: list, max_cost: float | None, what: str = "the job") -> None:
    """--max-cost: refuse (exit 2) before anything is sent when the estimate is above it, or unknown."""
    if max_cost is None:
        return
    if not max_cost > 0:
        raise UsageError(f"--max-cost must be more than 0, not {max_cost:g}")
    missing = [e for e in estimates if e.total is None]
    if missing:
        raise UsageError(f"--max-cost {max_cost:g}: the price of {what} is not known ({missing[0].line()}); "
                         "nothing was submitted",
                         hint="`dtrain cost SPEC` asks the Azure Retail Prices API where the network reaches it "
                              "and caches the price for later runs; or submit without --max-cost")
    total = round(sum(e.total for e in estimates), 2)
    if total > max_cost:
        detail = estimates[0].line() if len(estimates) == 1 else f"{len(estimates)} jobs, the first {estimates[0].line()}"
        raise UsageError(f"{what} would cost up to ${total:,.2f}, above --max-cost {max_cost:g} ({detail}); "
                         "nothing was submitted",
                         hint="lower resources.instance_count or limits.timeout, or raise --max-cost")
