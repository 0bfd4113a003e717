"""`dtrain cost SPEC`: what a job (or a --matrix grid) would cost on Azure ML, with the price's source and age;
`estimate_specs` is what `submit --max-cost` and `submit --dry-run` use (docs/capacity.md)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from .app import app
from .options import (Allow, Matrix, Output, ResourceGroup, Sets, Subscription, WorkspaceName, check_output, emit,
                      load, runner, workspace)

Hours = typer.Option(None, "--hours", metavar="H", help="Hours the job runs (default: the spec's limits.timeout; "
                     "a spec without one needs --hours).")
Region = typer.Option(None, "--region", metavar="REGION", help="Azure region of the prices (default: "
                      "DTRAIN_REGION, else eastus), e.g. westus3.")
Tier = typer.Option(None, "--tier", metavar="TIER", help="dedicated or low_priority (default: low_priority for "
                    "queue_settings.job_tier spot, else dedicated).")

MaxCost = Annotated[Optional[float], typer.Option("--max-cost", metavar="AMOUNT", help="Refuse (exit 2, nothing "
                                                  "sent) a job or grid whose estimated cost in USD is above AMOUNT "
                                                  "(`dtrain cost`; a local run is priced as on Azure ML).")]


@app.command()
def cost(
    spec: str = typer.Argument(..., metavar="SPEC"),
    hours: Optional[float] = Hours,
    region: Optional[str] = Region,
    tier: Optional[str] = Tier,
    matrix: Matrix = None,
    set_: Sets = None,
    allow: Allow = None,
    offline: bool = typer.Option(False, "--offline", help="Do not ask the Azure Retail Prices API: use the "
                                 "cached prices and the snapshot shipped with dtrain."),
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
    output: Output = "text",
):
    """Estimate what a job costs on Azure ML: the VM size's price per hour (region, tier) x nodes x hours, with
    where the price came from and how old it is. With --matrix, every combination and the total. Submits
    nothing; exit 2 for a spec without a VM size or a run time. With the workspace flags, a spec that names a
    cluster and no resources.instance_type is priced by the cluster's VM size, in the workspace's region."""
    check_output(output, ("text", "json"))
    ws = workspace(subscription, resource_group, workspace_)
    names, estimates = estimate_specs(spec, set_, allow, matrix, hours=hours, region=region, tier=tier,
                                      online=not offline, cluster=cluster_reader(ws) if ws.given() else None)
    from ..cost import summary

    s = summary(estimates, names)
    if output == "json":
        return emit(s, "json")
    show(names, estimates, s["total"])


def cluster_reader(ws):
    """compute name -> (VM size, region) read from the workspace, once per name (cost.estimate's `cluster`)."""
    from functools import cache

    one = cache(lambda: runner(ws))       # one Runner, so one workspace client, for every name
    return cache(lambda name: one().cluster(name))


def estimate_specs(spec: str, sets, allow, matrix, *, hours=None, region=None, tier=None, online: bool = False,
                   local: bool = False, specs=None, cluster=None):
    """(names, estimates) of the spec or of each --matrix combination (names None for one job)."""
    from .. import grid
    from ..cost import estimate

    if matrix:
        g = grid.build_grid(spec, sets, matrix)
        members = [(m.name, m.spec) for m in g.members]
    else:
        members = [(None, specs if specs is not None else load(spec, sets, allow))]
    ests = [estimate(s, hours=hours, region=region, tier=tier, online=online,
                     local=local or s.is_local_compute, cluster=cluster) for _, s in members]
    return [n for n, _ in members], ests


def show(names, estimates, total) -> None:
    from ..output import note, out

    for name, e in zip(names, estimates):
        out((f"{name}: " if name else "") + e.line())
    if len(estimates) > 1:
        out(f"total: ${total:,.2f} for {len(estimates)} jobs" if total is not None
            else f"total: unknown ({sum(e.total is None for e in estimates)} of {len(estimates)} jobs have no price)")
    regions = {e.region_from for e in estimates}
    if regions == {"default"}:
        note(f"prices for region {estimates[0].region} (the default): --region or DTRAIN_REGION for another")
    if any(e.hours_from == "limits.timeout" for e in estimates):
        note("limits.timeout is the longest the job may run, so this is the most it costs")


def dry_run_line(spec_obj, *, local: bool, ws=None) -> None:
    """`submit --dry-run`: one note with the estimate (never asks the prices API, never fails the dry run;
    with workspace flags, a cluster's VM size is read)."""
    from ..cost import estimate
    from ..errors import DtrainError
    from ..output import note

    try:
        e = estimate(spec_obj, online=False, local=local,
                     cluster=cluster_reader(ws) if ws is not None and ws.given() and not local else None)
    except DtrainError as exc:
        return note(f"cost: not estimated ({exc.message})")
    note("cost: up to " + e.line() if e.total is not None else "cost: " + e.line())


def cost_gate(spec_obj, max_cost, is_local: bool, attempts: int, ws=None) -> None:
    """submit --max-cost: a retry chain is priced as all the attempts it may run; an Azure job that names a
    cluster and no instance_type, by the cluster's VM size (read from the workspace it goes to)."""
    if max_cost is not None:
        from ..cost import check_max_cost

        one = estimate_specs("", None, None, None, specs=spec_obj, local=is_local,
                             cluster=None if is_local else cluster_reader(ws))[1]
        check_max_cost(one * attempts, max_cost, "the job" if attempts == 1 else
                       f"the retry chain ({attempts} attempts at most)")
