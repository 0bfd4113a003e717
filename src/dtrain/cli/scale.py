"""`dtrain scale`: run the spec at each node count (a grid, cli/grid.py) and report how it scales."""
from __future__ import annotations

from typing import Optional

import typer

from ..errors import UsageError
from ..exitcodes import ExitCode
from .app import app
from .options import (Inputs, MaxParallel, ResourceGroup, Sets, Subscription, Timeout, WorkspaceName, check_output,
                      check_timeout, runner, submit_options, workspace)


@app.command()
def scale(
    spec: str = typer.Argument(..., metavar="SPEC"),
    nodes: str = typer.Option(..., "--nodes", metavar="N1,N2,...", help="Node counts to run the spec at, e.g. "
                              "1,2,4 (processes per node unchanged)."),
    metric: str = typer.Option("samples_per_s", "--metric", help="The throughput metric the jobs log (MLflow); "
                               "the shipped training scripts log samples_per_s."),
    local: bool = typer.Option(False, "--local", help="Run here (N nodes x P processes emulated)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimizer steps per run: sets the spec's input "
                                        "`steps` (the shipped templates pass it to the script as --steps)."),
    warmup: float = typer.Option(0.2, "--warmup", help="Fraction of each run's logged steps left out as warm-up "
                                 "(the first logged point is always left out)."),
    name: Optional[str] = typer.Option(None, "--name", help="Group name; the same command with the same name "
                                       "reads the runs it already made instead of starting them again."),
    set_: Sets = None,
    input_: Inputs = None,
    max_parallel: MaxParallel = None,
    output: str = typer.Option("text", "--output", "-o", help="text (table and plot) or json."),
    timeout: Timeout = None,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Measure how the job scales: run it at each node count, read the throughput metric each run logged,
    and report throughput per process and efficiency against the smallest run (docs/scaling.md)."""
    from .. import scale as report
    from ..output import note, print_diagnostics

    check_output(output, ("text", "json"))
    check_timeout(timeout)
    ws = workspace(subscription, resource_group, workspace_, local)
    counts = report.node_counts(nodes)
    _check(steps, warmup, max_parallel)
    submit_options(name, None)
    g = report.study(spec, counts, sets=set_, steps=steps, name=name)
    print_diagnostics(g.warnings)
    is_local = local or all(m.spec.is_local_compute for m in g.members)
    k = max_parallel or (1 if is_local else None)   # runs sharing the CPUs would slow each other
    if output == "text":
        note(f"group {g.group}: {len(g.members)} runs ({', '.join(str(c) for c in counts)} nodes x "
             f"{g.members[0].spec.processes_per_node} processes)" + (f", {k} at a time" if k else ""))
    r = runner(ws)
    from .grid import run_grid

    final = run_grid(r, g, local=is_local, wait=True, output=output, timeout=timeout, max_parallel=k,
                     inputs=submit_options(None, input_).input_paths, metric_key=None,
                     stream_status=output == "text", show_final=False)
    rs = report.measure(r, g, final, metric, warmup)
    _print(g, rs, metric, warmup, output)
    _exit(g, final, rs, metric)


def _check(steps, warmup: float, max_parallel) -> None:
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be at least 1, not {steps}")
    if not 0 <= warmup < 1:
        raise UsageError(f"--warmup is a fraction of the steps, from 0 to below 1, not {warmup:g}")
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be at least 1, not {max_parallel}")


def _print(g, rs, metric: str, warmup: float, output: str) -> None:
    from .. import scale as report
    from ..output import err, out, out_json

    if output == "json":
        out_json({"group": g.group, **report.report(rs, metric, warmup)})
        return
    for line in report.table(rs, metric) + [""] + report.plot(rs):
        out(line)
    err(report.verdict(rs))
    _costs(rs)


def _costs(rs) -> None:
    """What each run cost and the study in all (cost.py), where its VM size has a price."""
    from ..cost import cost_text
    from ..output import err

    priced = [r for r in rs if r.cost and r.cost.get("total") is not None]
    for r in priced:
        err(f"cost of {r.job} ({r.nodes} node{'s' if r.nodes != 1 else ''}): {cost_text(r.cost)}")
    if len(priced) > 1:
        err(f"cost of the study: ${sum(r.cost['total'] for r in priced):,.2f}")


def _exit(g, final: dict, rs, metric: str) -> None:
    from .. import scale as report
    from ..status import exit_code, worst

    code = worst(exit_code(final[m.name]) for m in g.members)
    missing = report.missing_metric(rs)
    if missing and code == ExitCode.OK:
        raise UsageError(f"{', '.join(missing)} logged no '{metric}'",
                         hint="pass --metric NAME, a metric the script logs (`dtrain metrics NAME` lists them)")
    raise typer.Exit(code)
