"""`dtrain submit`: one job, a retry chain (--retries) or a grid (--matrix, cli/grid.py)."""
from __future__ import annotations

from typing import Optional

import typer

from .app import app
from .cost import MaxCost, cost_gate
from .options import (Allow, HostPython, Inputs, Matrix, Python, MaxParallel, Output, ResourceGroup, Sets, Subscription,
                      Web, WorkspaceName,
                      check_output, check_timeout, emit, load, runner, submit_options, useless, useless_all, workspace)


@app.command()
def submit(
    spec: str = typer.Argument(..., metavar="SPEC"),
    local: bool = typer.Option(False, "--local", help="Run on this machine (N nodes x P processes emulated)."),
    wait: bool = typer.Option(False, "--wait", help="Follow the job to the end; exit by its outcome."),
    name: Optional[str] = typer.Option(None, "--name", help="Job name (resubmitting the same spec under the "
                                       "same name follows the existing job)."),
    set_: Sets = None,
    input_: Inputs = None,
    output: Output = "text",
    timeout: Optional[float] = typer.Option(None, "--timeout", help="With --wait: stop waiting after S seconds "
                                            "(exit 4; the job keeps running)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="With --wait: do not stream logs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Submit nothing: print what `dtrain render` prints "
                                 "for this spec and flags (the local plan as JSON for a local run, else the "
                                 "Azure job YAML, and whether Azure ML will build a new image) and exit 0."),
    matrix: Matrix = None,
    max_parallel: MaxParallel = None,
    retries: Optional[int] = typer.Option(None, "--retries", metavar="N", help="Retry the job up to N more times "
                                          "when an attempt is lost to infrastructure (NotResponding: a lost node, "
                                          "preemption); each attempt resumes from the checkpoints of the last "
                                          "(docs/retries.md). Attempts are named NAME, NAME-r1, ..."),
    retry_on: Optional[str] = typer.Option(None, "--retry-on", metavar="WHAT", help="With --retries: infrastructure "
                                           "(the default), failed (also retry Failed attempts, for flaky "
                                           "failures), or causes `dtrain why` names, e.g. collective_timeout,"
                                           "nccl_error (retry a Failed attempt only for those). Canceled and "
                                           "timed-out attempts are never retried."),
    preempt_after: Optional[str] = typer.Option(None, "--preempt-after", metavar="DURATION", help="With --local: "
                                                "the eviction drill; DURATION (5s, 2m) after the processes start, "
                                                "every rank gets SIGTERM, the rest SIGKILL after the grace period, "
                                                "and the job ends preempted (NotResponding, exit 5; retried by "
                                                "--retries: docs/retries.md)."),
    allow: Allow = None,
    python: Python = None,
    web: Web = False,
    host_python: HostPython = False,
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", metavar="N", help="With --matrix: allow a grid of "
                                           "up to N jobs (default 1000; a larger grid is refused before anything "
                                           "is built)."),
    max_cost: MaxCost = None,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Submit a job. Prints its name (or JSON); with --wait, streams every rank's logs and exits by outcome.
    With --matrix, one job per combination of the values (docs/grids.md); with --retries, a chain of attempts
    followed as one job (docs/retries.md)."""
    from ..chain import check_policy

    check_output(output)
    policy = check_policy(retries, retry_on)
    useless("--retries", policy and matrix, "does not apply with --matrix (retry a grid's jobs one by one with "
            "--retries and --name)")
    useless("--retries", policy and dry_run, "does nothing with --dry-run, which submits nothing")
    useless("--preempt-after", preempt_after and (matrix or dry_run), "applies to one job, submitted (not with "
            "--matrix or --dry-run)")
    ws = workspace(subscription, resource_group, workspace_, local)
    if matrix:
        from .grid import submit_grid

        return submit_grid(spec, matrix, local=local, wait=wait, name=name, sets=set_, inputs=input_, output=output,
                           timeout=timeout, quiet=quiet, dry_run=dry_run, max_parallel=max_parallel, ws=ws, allow=allow,
                           max_jobs=max_jobs, max_cost=max_cost)
    useless("--max-parallel", max_parallel is not None, "only applies with --matrix (one job has nothing to throttle)")
    useless("--max-jobs", max_jobs is not None, "only applies with --matrix")
    _check_flags(dry_run, wait, output, timeout, quiet)
    spec_obj = load(spec, set_, allow)
    is_local = local or spec_obj.is_local_compute
    useless("--input", input_ and not is_local, "only applies to local runs (Azure resolves its own inputs)")
    useless("--python, --host-python", (python or host_python) and not is_local, "only apply to local runs (on Azure "
            "the environment's python runs)")
    useless("--preempt-after", preempt_after and not is_local, "only applies to local runs (Azure preempts on its own)")
    cost_gate(spec_obj, max_cost, is_local, policy.retries + 1 if policy else 1, ws)
    if dry_run:
        from .dry_run import dry_run as show_dry_run

        return show_dry_run(spec_obj, is_local=is_local, ws=ws, name=name, inputs=input_, allow=allow,
                            python=python, host_python=host_python)
    r = runner(ws)
    opts = submit_options(name, input_, allow, python, host_python)
    opts.preempt_after_s = _preempt_after(preempt_after)
    info = r.submit(spec_obj, opts, local=is_local, policy=policy)
    _submitted(info, policy, wait, output)
    if web:
        from . import show

        show.web(info)
    if wait:
        from .follow_view import follow_jobs

        follow_jobs(r, [info.name], output=output, timeout=timeout, stream=not quiet, submitted=info)


def _preempt_after(text: str | None) -> float | None:
    from ..durations import parse_duration

    hint = "the time after the job's processes start when every rank gets SIGTERM"
    return parse_duration(text, "--preempt-after", hint) if text is not None else None


def _check_flags(dry_run: bool, wait: bool, output: str, timeout, quiet: bool) -> None:
    """Flags that would do nothing with the others given: usage errors before anything is submitted."""
    if dry_run:
        useless_all([f for f, v in (("--wait", wait), ("--output", output != "text"),
                                    ("--timeout", timeout is not None), ("--quiet", quiet)) if v],
                    "--dry-run, which submits nothing and prints what `dtrain render` prints")
    check_timeout(timeout)
    useless("--timeout", timeout is not None and not wait, "only applies with --wait")
    useless("--quiet", quiet and not wait, "only applies with --wait (without it no log is streamed)")
    useless("--quiet", quiet and output == "json", "does nothing with --output json, which streams no log")


def _submitted(info, policy, wait: bool, output: str) -> None:
    """What submit says once the job is sent: its name (or JSON) without --wait, a note with it."""
    from ..output import note, out

    if policy is not None and not wait and output == "text":
        note(f"{info.name}: up to {policy.retries} more attempt{'s' if policy.retries > 1 else ''} "
             f"({policy.retry_on}); `dtrain wait {info.name}` follows the chain and submits them")
    if wait:
        if output == "text":
            note(info.name + (f": {info.url}" if info.url else ""))
    elif output != "text":
        emit(info.to_dict(), output)
    else:
        out(info.name)
        if info.url:
            note(f"{info.url}")
