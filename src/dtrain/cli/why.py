"""dtrain why: what went wrong in a job, read from every rank's log (dtrain.diagnose), and `top_cause`
for the end of a failed wait."""
from __future__ import annotations

from pathlib import Path

import typer

from ..errors import UsageError
from .app import app
from .options import Local, ResourceGroup, Subscription, WorkspaceName, check_output, runner, workspace


@app.command()
def why(
    target: str = typer.Argument(..., metavar="NAME|DIR", help="A job name, or a folder of logs (what `az ml job "
                                 "download` leaves: user_logs/std_log_process_N.txt; or a local job folder)."),
    output: str = typer.Option("text", "--output", "-o", help="text, or json: {\"job\", \"causes\": [{kind, "
                               "ranks, nodes, summary, evidence: [{file, line, text}], hint}]}, and for a job \"hardware\": the "
                               "findings of `dtrain top`."),
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Say why a job failed: read every rank's log and report each cause found (a collective timeout and the
    ranks that lagged, GPU or host out of memory, more processes than GPUs, a missing package, a rank that
    never joined, no space left, NCCL errors, else the first traceback), with the evidence (file:line) and
    what to change (docs/troubleshooting.md). Exit 0 whatever is found; 2 for an unknown job or folder."""
    from ..diagnose import diagnose, folder_logs

    check_output(output, ("text", "json"))
    folder = Path(target)
    if folder.is_dir() and not local:
        logs = folder_logs(folder)
        if not logs:
            raise UsageError(f"no rank logs under {target}",
                             hint="expected user_logs/std_log_process_N.txt files (or a local job folder)")
        causes = diagnose(logs)
        show(target, causes, output)
        return
    if "/" in target:
        raise UsageError(f"no folder {target}", hint="give a job name or a folder of logs")
    r = runner(workspace(subscription, resource_group, workspace_, local))
    show(target, r.why(target, local=local), output, _hardware(r, target, local, output))


def _hardware(r, name: str, local: bool, output: str) -> list:
    """What the job's system metrics say (cli/top.py): text lines, or the findings for json."""
    from .top import hardware_lines

    if output == "json":
        return [f.to_dict() for f in r.hw_findings(name, local=local)]
    return hardware_lines(r, r.status(name, local=local))


def show(job: str, causes: list, output: str, hardware: list | None = None) -> None:
    from ..output import out, out_json, paint, shown

    if output == "json":
        doc = {"job": job, "causes": [c.to_dict() for c in causes]}
        out_json(doc if hardware is None else {**doc, "hardware": hardware})   # a job's, not a folder's
        return
    for line in hardware or []:                       # how the hardware was used (dtrain top), first
        out(shown(("" if line.startswith(" ") else "hardware: ") + line))
    if not causes:
        out(f"{job}: no cause found in the logs")
        return
    for i, c in enumerate(causes):
        out(("" if i == 0 else "\n") + f"{paint(c.kind, '1')}: {shown(c.summary)}")
        where = ", ".join(str(r) for r in c.ranks)
        nodes = ", ".join(str(n) for n in c.nodes)
        if where:
            out(f"  ranks: {where}" + (f"  nodes: {nodes}" if nodes else ""))
        for file, line, text in c.evidence:
            out(f"  {shown(file)}:{line}: {shown(text)}")
        out(f"  hint: {c.hint}")


def top_cause(runner_, info) -> None:
    """Under a failed job's summary: its top cause and hint. Diagnosing never fails the command."""
    from ..errors import DtrainError
    from ..output import err, shown

    try:
        causes = runner_.why(info.name)
    except (DtrainError, OSError):
        return
    if causes:
        c = causes[0]
        err(f"{info.name}: why: {c.kind}: {shown(c.summary)}")
        err(f"  hint: {c.hint} (all causes: `dtrain why {info.name}`)")
