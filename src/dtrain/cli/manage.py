"""Commands that change a submitted job's metadata, as `az ml job update/archive/restore` do: update
(tags, display name, description), archive and restore (an archived job is hidden from `dtrain list`)."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .app import app
from .options import JobName, Local, Output, ResourceGroup, Subscription, WorkspaceName, check_output, pairs, runner, \
    workspace
from . import show


@app.command()
def update(
    name: JobName,
    tag: Optional[List[str]] = typer.Option(None, "--tag", metavar="K=V",
                                            help="Set this tag (repeatable; other tags are kept)."),
    remove_tag: Optional[List[str]] = typer.Option(None, "--remove-tag", metavar="K",
                                                   help="Remove this tag (repeatable)."),
    display_name: Optional[str] = typer.Option(None, "--display-name", help="New display name."),
    description: Optional[str] = typer.Option(None, "--description", help="New description."),
    local: Local = False,
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Change a submitted job's tags, display name or description (`az ml job update --set tags.k=v`); the job
    itself is not touched. A retry chain's NAME changes its first attempt."""
    check_output(output)
    ws = workspace(subscription, resource_group, workspace_, local)
    info = runner(ws).update(name, tags=pairs(tag, "--tag"), remove_tags=[k.strip() for k in remove_tag or []],
                             display_name=display_name, description=description, local=local)
    _show(info, output)


@app.command()
def archive(
    name: JobName,
    local: Local = False,
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Archive an ended job: `dtrain list` hides it unless --include-archived (`az ml job archive`); status,
    logs and metrics still read it."""
    check_output(output)
    _show(runner(workspace(subscription, resource_group, workspace_, local)).archive(name, local=local), output)


@app.command()
def restore(
    name: JobName,
    local: Local = False,
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Restore an archived job: `dtrain list` shows it again (`az ml job restore`)."""
    check_output(output)
    _show(runner(workspace(subscription, resource_group, workspace_, local)).restore(name, local=local), output)


def _show(info, output: str) -> None:
    """The job after the change: its line, then what update and archive change (text), or its JSON."""
    from ..output import out, shown
    from .options import emit

    if output != "text":
        return emit(info.to_dict(), output)
    show.info(info, output)
    if info.display_name:
        out(f"  display name: {shown(info.display_name, sys.stdout)}")
    if info.description:
        out(f"  description: {shown(info.description, sys.stdout)}")
    if info.tags:
        out("  tags: " + shown(", ".join(f"{k}={v}" for k, v in sorted(info.tags.items())), sys.stdout))
    out(f"  archived: {'yes' if info.archived else 'no'}")
