"""dtrain list: jobs newest first, with az ml job list's filters (archived jobs hidden unless asked for,
--all-results) and dtrain's own (--experiment, --tag, --status)."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..errors import UsageError
from .app import app
from .options import Experiment, Output, ResourceGroup, Subscription, Tags, WorkspaceName, check_output, emit, \
    pairs, runner, useless, workspace


@app.command("list")
def list_(
    experiment: Experiment = None,
    tag: Tags = None,
    status: Optional[List[str]] = typer.Option(None, "--status", metavar="STATUS", help="Only jobs in this status "
                                               "(any case; repeatable: any of them), e.g. Running, Failed."),
    limit: int = typer.Option(50, "--limit", "--max-results", "-r", help="At most this many jobs, newest first."),
    all_results: bool = typer.Option(False, "--all-results", help="Every job: no --limit (az ml's flag)."),
    include_archived: bool = typer.Option(False, "--include-archived", help="Archived jobs too (`dtrain archive`)."),
    archived_only: bool = typer.Option(False, "--archived-only", help="Archived jobs alone."),
    local: bool = typer.Option(False, "--local", help="Local jobs only."),
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """List jobs, newest first (50 unless --limit or --all-results); archived jobs only with --include-archived
    or --archived-only, as `az ml job list`."""
    from ..chain import attempt_label
    from ..output import err, out, shown

    check_output(output)
    if limit < 1:
        raise UsageError(f"--limit must be a positive number of jobs, not {limit}")
    useless("--include-archived", include_archived and archived_only, "and --archived-only together: give one")
    ws = workspace(subscription, resource_group, workspace_, local)
    infos = runner(ws).list(local=local, experiment=experiment, tags=pairs(tag, "--tag", bare_ok=True),
                            limit=None if all_results else limit, statuses=status or (),
                            archived="only" if archived_only else "all" if include_archived else "hide")
    if output != "text":
        return emit([i.to_dict() for i in infos], output)
    for i in infos:
        c = i.chain                        # a retry chain's row: which attempt it is on (docs/retries.md)
        out(f"{i.name}\t{shown(i.status, sys.stdout)}\t{i.nodes}x{i.processes_per_node}\t"
            f"{shown(i.experiment_name or '', sys.stdout)}\t{i.created or ''}"
            + (f"\t{attempt_label(c)}" if c else "") + ("\tarchived" if i.archived else ""))
        if i.status == "Unreadable" and i.failure:      # a local job whose state file is corrupt
            err(f"warning: {i.name}: {shown(i.failure.message)}")
