"""`dtrain clean`: remove finished local jobs (with --datastores the folders only they wrote, with --envs the job
environments nothing needs)."""
from __future__ import annotations

import sys

import typer

from .app import app
from .options import Output, check_output, runner


@app.command()
def clean(
    older_than: str = typer.Option(..., "--older-than", metavar="AGE",
                                   help="Only jobs that ended longer ago than this (7d, 12h, 30m, 90s)."),
    snapshots_only: bool = typer.Option(False, "--snapshots-only",
                                        help="Remove only the code snapshots; keep state, logs and outputs."),
    datastores: bool = typer.Option(False, "--datastores",
                                    help="Also remove the $DTRAIN_HOME/datastores folders (checkpoints) that only "
                                         "the removed jobs wrote; a folder a remaining job uses stays."),
    envs: bool = typer.Option(False, "--envs", help="Also remove the job environments ($DTRAIN_HOME/envs, built "
                              "from conda files) that no unfinished job uses and no job used for AGE."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be removed; remove nothing."),
    output: Output = "text",
):
    """Remove finished local jobs (running jobs are never touched; $DTRAIN_HOME/datastores only with --datastores)."""
    from ..output import err, note, out, out_json, shown

    check_output(output)
    report = runner().clean(older_than, dry_run=dry_run, snapshots_only=snapshots_only, datastores=datastores,
                            envs=envs)
    stores = [{"path": f.path, "bytes": f.bytes, "jobs": f.jobs} for f in report.datastores]
    built = [{"path": f.path, "bytes": f.bytes, "last_used": _iso(f.last_used)} for f in report.envs]
    if output == "json":
        return out_json({"removed": report.removed, "bytes_freed": report.bytes_freed, "dry_run": dry_run,
                         "kept_running": report.kept_running, "unreadable": report.unreadable,
                         "skipped": report.notes, **({"datastores": stores} if datastores else {}),
                         **({"envs": built} if envs else {})})
    for name in report.removed:
        out(name)
    for f in report.datastores + report.envs:
        out(f"{shown(f.path, sys.stdout)}\t{_size(f.bytes)}")     # a path from a spec: escaped on a terminal
    verb = "would remove" if dry_run else "removed"
    what = "snapshots of " if snapshots_only else ""
    err(f"{verb} {what}{len(report.removed)} job folder(s)"
        + (f" and {len(report.datastores)} datastore folder(s)" if datastores else "")
        + (f" and {len(report.envs)} job environment(s)" if envs else "")
        + f", {report.bytes_freed / 1e6:.1f} MB"
        + (f"; {len(report.kept_running)} running job(s) left alone" if report.kept_running else "")
        + (f"; {len(report.unreadable)} unreadable job(s) left alone: {', '.join(report.unreadable)}"
           if report.unreadable else ""))
    for n in report.notes:
        note(n)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _iso(epoch_s: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="seconds")
