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
                               "ranks, nodes, summary, evidence: [{file, line, text}], hint}]}, and for a job \"hardware\": "
                               "the findings of `dtrain top`."),
    instance_type: str = typer.Option(None, "--instance-type", metavar="SIZE", help="With a folder: the VM size "
                                      "the job ran on (says whether NCCL on TCP sockets is a slowdown: sizes "
                                      "with InfiniBand)."),
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Say why a job failed: read every rank's log and report each cause found (a collective timeout and the
    ranks that lagged, GPU or host out of memory, more processes than GPUs, a missing package, a rank that
    never joined, no space left, NCCL errors, preemption or a lost node, else the first traceback; NCCL on
    TCP sockets on an InfiniBand VM size), with the evidence (file:line) and what to change
    (docs/troubleshooting.md). Exit 0 whatever is found; 2 for an unknown job or folder."""
    from ..diagnose import JobFacts, diagnose, folder_logs

    check_output(output, ("text", "json"))
    folder = Path(target)
    if folder.is_dir() and not local:
        logs = folder_logs(folder)
        if not logs:
            raise UsageError(f"no rank logs under {target}",
                             hint="expected user_logs/std_log_process_N.txt files (or a local job folder)")
        causes = diagnose(logs, job=JobFacts(instance_type=instance_type))
        show(target, causes, output)
        return
    if "/" in target:
        raise UsageError(f"no folder {target}", hint="give a job name or a folder of logs")
    if instance_type:
        raise UsageError("--instance-type only applies to a folder of logs", hint="a job's own VM size is used")
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
        for file, line, text in c.evidence:      # line 0: the job's status, not a line of a file
            out(f"  {shown(file)}" + (f":{line}" if line else "") + f": {shown(text)}")
        out(f"  hint: {c.hint}")


def top_causes(runner_, infos) -> dict:
    """The top cause of each job that failed, was preempted or lost (exit 1 or 5), by name, for the end of a
    wait and the CI summary. Diagnosing never fails the command: a job that cannot be read has none."""
    from ..errors import DtrainError
    from ..exitcodes import ExitCode
    from ..status import exit_code

    found = {}
    for info in infos:
        if exit_code(info) not in (ExitCode.JOB_FAILED, ExitCode.INFRA):
            continue
        try:
            causes = runner_.why(info.name)
        except (DtrainError, OSError):
            continue
        if causes:
            found[info.name] = causes[0]
    return found


def show_top_cause(name: str, c) -> None:
    """Under a failed job's summary: its top cause and hint."""
    from ..output import err, shown

    err(f"{name}: why: {c.kind}: {shown(c.summary)}")
    err(f"  hint: {c.hint} (all causes: `dtrain why {name}`)")
