"""`submit --matrix`: every combination validated, then submitted throttled (cli/grid_run.py prints it)."""
from __future__ import annotations

import typer

from ..errors import UsageError
from ..output import note, out
from .grid_run import run_grid
from .options import check_timeout, runner, submit_options, useless, useless_all


def submit_grid(spec: str, matrix, *, local: bool, wait: bool, name, sets, inputs, output: str, timeout,
                quiet: bool, dry_run: bool, max_parallel, ws, allow=None, max_jobs=None, max_cost=None) -> None:
    """Validate every combination, then submit them throttled; with --wait exit by the worst outcome."""
    from .. import grid
    from ..output import print_diagnostics
    from ..status import exit_code, worst

    useless("--quiet", quiet, "does nothing with --matrix, which streams no log (the table shows every job)")
    if dry_run:
        useless_all([f for f, v in (("--wait", wait), ("--output", output != "text"), ("--timeout", timeout is not None),
                                    ("--max-parallel", max_parallel is not None)) if v] + ws.given(),
                    "--dry-run, which submits nothing")
    check_timeout(timeout)
    useless("--timeout", timeout is not None and not wait, "only applies with --wait")
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be at least 1, not {max_parallel}")
    submit_options(name, None)               # the group name is checked as a job name
    g = grid.build_grid(spec, sets, matrix, name, allow=allow, max_jobs=max_jobs or grid.MAX_JOBS)
    print_diagnostics(g.warnings)
    is_local = grid.where(g, local)
    _gate(g, max_cost, is_local, ws)
    useless("--input", inputs and not is_local, "only applies to local runs (Azure resolves its own inputs)")
    if dry_run:
        for m in g.members:
            out(m.name + "\t" + " ".join(f"{p}={v}" for p, v in m.combination.items()))
        return note(f"{len(g.members)} jobs in group {g.group}, all valid; nothing was submitted")
    k = max_parallel or grid.default_max_parallel(g, is_local)
    n = len(g.members)
    if output == "text":
        note(f"group {g.group}: {n} job{'s' if n != 1 else ''}" + (f", at most {k} at a time" if k and k < n else ""))
    final = run_grid(runner(ws), g, local=is_local, wait=wait, output=output, timeout=timeout, max_parallel=k,
                     inputs=submit_options(None, inputs).input_paths, tags=submit_options(None, None, allow).tags)
    if wait:
        raise typer.Exit(worst(exit_code(final[m.name]) for m in g.members))


def _gate(g, max_cost, is_local: bool, ws) -> None:
    """--max-cost: every combination priced, the sum gated, before any is sent."""
    if max_cost is not None:
        from ..cost import check_max_cost, estimate
        from .cost import cluster_reader

        cluster = None if is_local else cluster_reader(ws)
        check_max_cost([estimate(m.spec, local=is_local, cluster=cluster) for m in g.members], max_cost,
                       f"the grid of {len(g.members)} jobs")
