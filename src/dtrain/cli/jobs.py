"""Commands over submitted jobs, by name: status, cancel, clean (list: listing.py)."""
from __future__ import annotations

import typer

from ..errors import UsageError
from .app import app
from .options import (Local, OptionalJobNames, Output, ResourceGroup, Subscription, Tags, WorkspaceName,
                      check_output, emit, pairs, runner, workspace)
from . import show


@app.command()
def status(
    names: OptionalJobNames = None,
    tag: Tags = None,
    output: Output = "text",
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Show jobs' status: each NAME a job, a retry chain or a grid (--matrix --name G: its jobs), and every job
    --tag lists. Exit 0 whatever the status; errors only when a job cannot be read."""
    ws = workspace(subscription, resource_group, workspace_, local)
    check_output(output)
    r = runner(ws)
    jobs = _jobs(r, names, tag, local)
    infos = [r.status(n, local=local) for n in jobs]
    if output != "text":
        return emit(infos[0].to_dict() if _single(names, tag, jobs) and output == "json" else
                    [i.to_dict() for i in infos], output)
    for info in infos:
        show.info(info, output)
        show.attempts(info)
        if info.ports and not info.terminal:          # where a running local job listens (debugging)
            from ..output import err

            err("ports: " + ", ".join(f"{k}={v}" for k, v in info.ports.items()))


@app.command()
def cancel(
    names: OptionalJobNames = None,
    tag: Tags = None,
    local: Local = False,
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Cancel jobs (each NAME a job, a retry chain or a grid; and every job --tag lists): every process of
    each is stopped."""
    ws = workspace(subscription, resource_group, workspace_, local)
    check_output(output)
    r = runner(ws)
    jobs = _jobs(r, names, tag, local)
    infos = [r.cancel(n, local=local) for n in jobs]
    if output != "text":
        return emit(infos[0].to_dict() if _single(names, tag, jobs) and output == "json" else
                    [i.to_dict() for i in infos], output)
    for info in infos:
        show.info(info, output)


def _jobs(r, names, tag, local: bool) -> list[str]:
    """The jobs the NAMEs and --tag filters stand for; a usage error when they name none."""
    if not names and not tag:
        raise UsageError("name a job (or a grid), or give --tag K=V", hint="`dtrain list` shows job names")
    jobs = r.expand(names or [], tags=pairs(tag, "--tag", bare_ok=True), local=local)
    if not jobs:
        raise UsageError(f"no job has the tag{'s' if len(tag or []) > 1 else ''} {', '.join(tag or [])}",
                         hint="`dtrain list --tag K=V` shows what a filter matches")
    return jobs


def _single(names, tag, jobs) -> bool:
    """One job named as such (not a grid, not a filter): its JSON is one object, as it always was."""
    return bool(names) and len(names) == 1 and not tag and jobs == list(names)


@app.command()
def clean(
    older_than: str = typer.Option(..., "--older-than", metavar="AGE",
                                   help="Only jobs that ended longer ago than this (7d, 12h, 30m, 90s)."),
    snapshots_only: bool = typer.Option(False, "--snapshots-only",
                                        help="Remove only the code snapshots; keep state, logs and outputs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be removed; remove nothing."),
    output: Output = "text",
):
    """Remove finished local jobs (running jobs and $DTRAIN_HOME/datastores are never touched)."""
    from ..output import err, note, out, out_json

    check_output(output)
    report = runner().clean(older_than, dry_run=dry_run, snapshots_only=snapshots_only)
    if output == "json":
        return out_json({"removed": report.removed, "bytes_freed": report.bytes_freed, "dry_run": dry_run,
                         "kept_running": report.kept_running, "unreadable": report.unreadable,
                         "skipped": report.notes})
    for name in report.removed:
        out(name)
    verb = "would remove" if dry_run else "removed"
    what = "snapshots of " if snapshots_only else ""
    err(f"{verb} {what}{len(report.removed)} job folder(s), {report.bytes_freed / 1e6:.1f} MB"
        + (f"; {len(report.kept_running)} running job(s) left alone" if report.kept_running else "")
        + (f"; {len(report.unreadable)} unreadable job(s) left alone: {', '.join(report.unreadable)}"
           if report.unreadable else ""))
    for n in report.notes:
        note(n)
