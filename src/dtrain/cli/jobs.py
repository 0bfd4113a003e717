"""Commands over submitted jobs, by name: status, cancel (list: listing.py; clean: clean.py)."""
from __future__ import annotations

import typer

from ..errors import UsageError
from .app import app
from .options import (Local, OptionalJobNames, Output, ResourceGroup, Subscription, Tags, Web, WorkspaceName,
                      check_output, emit, pairs, runner, workspace)
from . import show


@app.command()
def status(
    names: OptionalJobNames = None,
    tag: Tags = None,
    output: Output = "text",
    local: Local = False,
    web: Web = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Show jobs' status: each NAME a job, a retry chain or a grid (--matrix --name G: its jobs), and every job
    --tag lists. One job: exit 0 whatever its status. Several (a grid, names, --tag): exit by the worst outcome
    of those that ended (as `wait` would), 0 while the rest run. Errors only when a job cannot be read."""
    from ..runner import Runner
    from ..status import exit_code, worst

    infos, single = _each(Runner.status, names, tag, output, local,
                          workspace(subscription, resource_group, workspace_, local))
    for info in infos if output == "text" else ():
        show.info(info, output)
        show.attempts(info)
        show.services(info)
    for info in infos if web else ():
        show.web(info)
        if info.ports and not info.terminal:          # where a running local job listens (debugging)
            from ..output import err

            err("ports: " + ", ".join(f"{k}={v}" for k, v in info.ports.items()))
    if not single:
        raise typer.Exit(worst(exit_code(i) for i in infos if i.terminal))


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
    from ..runner import Runner

    infos, single = _each(Runner.cancel, names, tag, output, local,
                          workspace(subscription, resource_group, workspace_, local))
    for info in infos if output == "text" else ():
        show.info(info, output)
        if not info.terminal:                 # Azure confirms a cancel later (CancelRequested, then Canceled)
            from ..output import note

            note(f"{info.name}: cancel requested, still in progress (status {info.status}); "
                 f"`dtrain wait {info.name}` follows it until it is Canceled")
    if not single:                            # several jobs: how they ended, as status and wait say it
        from ..status import exit_code, worst

        raise typer.Exit(worst(exit_code(i) for i in infos if i.terminal))


def _each(act, names, tag, output: str, local: bool, ws) -> tuple[list, bool]:
    """act (Runner.status or Runner.cancel) on every job NAMEs and --tag stand for: (JobInfos, whether one job
    was named as such); with -o json/jsonl the JSON is printed here (one object for one job, else a list)."""
    check_output(output)
    r = runner(ws)
    jobs = _jobs(r, names, tag, local)
    infos = [act(r, n, local=local) for n in jobs]
    single = _single(names, tag, jobs)
    if output != "text":
        emit(infos[0].to_dict() if single and output == "json" else [i.to_dict() for i in infos], output)
    return infos, single


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
