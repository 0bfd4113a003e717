"""Options and checks every command shares, declared once: the workspace (three flags, one typed value),
--output, --timeout, --local, --set, and the usage errors for flags that would do nothing."""
from __future__ import annotations

import os
from typing import Annotated, List, Optional

import typer

from ..completion import local_job_names
from ..workspace import Workspace
from .checks import OUTPUTS, check_output, check_positive, check_timeout, pairs, useless, useless_all  # noqa: F401


# Azure ML workspace: flags win over DTRAIN_*/AZURE_* variables, which win over config.json.
Subscription = Annotated[Optional[str], typer.Option("--subscription", help="Azure subscription id.")]
ResourceGroup = Annotated[Optional[str], typer.Option("--resource-group", "-g", help="Azure resource group.")]
WorkspaceName = Annotated[Optional[str], typer.Option("--workspace", "-w", help="Azure ML workspace name.")]
Output = Annotated[str, typer.Option("--output", "-o", help="text, json or jsonl.")]
Timeout = Annotated[Optional[float], typer.Option("--timeout", help="Stop waiting after S seconds (exit 4; "
                                                  "the jobs keep running).")]
Local = Annotated[bool, typer.Option("--local", help="Look only at local jobs.")]
Web = Annotated[bool, typer.Option("--web", help="Open the job in Azure ML Studio (prints the address where no "
                                   "browser can be opened).")]
Sets = Annotated[Optional[List[str]], typer.Option("--set", metavar="PATH=VALUE", help="Override a spec value, "
                                                   "as `az ml job create --set` does (repeatable).")]
Inputs = Annotated[Optional[List[str]], typer.Option("--input", metavar="NAME=PATH", help="Local path for an "
                                                     "input only Azure can resolve (local runs).")]
Tags = Annotated[Optional[List[str]], typer.Option("--tag", metavar="K=V", help="Only jobs with this tag (K alone: "
                                                   "with this tag key).")]
Experiment = Annotated[Optional[str], typer.Option("--experiment", help="Only jobs of this experiment.")]
JobName = Annotated[str, typer.Argument(metavar="NAME", autocompletion=local_job_names)]
JobNames = Annotated[List[str], typer.Argument(metavar="NAME...", autocompletion=local_job_names)]
OptionalJobNames = Annotated[Optional[List[str]], typer.Argument(metavar="[NAME...]", autocompletion=local_job_names)]
Matrix = Annotated[Optional[List[str]], typer.Option("--matrix", metavar="PATH=V1,V2", help="One job per value, "
                                                     "applied like --set; several --matrix: one job per combination "
                                                     "(the cross product). Every combination is validated before "
                                                     "the first submit.")]
Allow = Annotated[Optional[List[str]], typer.Option("--allow", metavar="CODE", help="Waive this validation rule "
                                                    "(its code, e.g. gpu-oversubscribed) for this command: its error "
                                                    "becomes a warning, and a submitted job is tagged dtrain.allow "
                                                    "(repeatable; docs/spec.md lists the codes).")]
Python = Annotated[Optional[str], typer.Option("--python", metavar="PATH", help="Local runs: the interpreter the "
                                                 "command's `python` is (default: the first python on PATH, "
                                                 "else dtrain's own environment's; DTRAIN_LOCAL_PYTHON).")]
HostPython = Annotated[bool, typer.Option("--host-python", help="Local runs: the command runs on the host's "
                                          "python, not in the environment dtrain builds from the spec's conda file "
                                          "(docs/environments.md).")]
MaxParallel = Annotated[Optional[int], typer.Option("--max-parallel", metavar="K", help="With --matrix (and scale): "
                                                    "at most K jobs not yet ended at a time. Default: local, CPUs / "
                                                    "processes per job (at least 1); Azure, no limit.")]


def workspace(subscription, resource_group, workspace_name, local: bool = False) -> Workspace:
    """The three workspace flags as one value; with --local they would do nothing (a usage error)."""
    ws = Workspace(subscription, resource_group, workspace_name)
    if local:
        useless(", ".join(ws.given()), ws.given(), "name an Azure ML workspace, and --local looks only at this machine")
    return ws


def runner(ws: Workspace | None = None):
    """The library a command acts through (dtrain.runner), printing what backends have to say."""
    from ..runner import Runner

    return Runner(ws, notify=notice)


def notice(n) -> None:
    """What a backend has to tell the user (backends never print): a note, or the SDK's own text as it is."""
    from ..output import err, note

    (err if n.verbatim else note)(n.text)


def submit_options(name, inputs, allow=None, python=None, host_python=False):
    """--name, --input, --allow and --python as the runner takes them; a waived rule is recorded in the
    job's tags."""
    from ..backends.base import SubmitOptions
    from ..backends.names import check_job_name

    check_job_name(name)
    paths = {k: os.path.abspath(v) for k, v in pairs(inputs, "--input").items()}
    useless("--host-python", host_python and python, "and --python both choose the interpreter: give one")
    return SubmitOptions(name=name, input_paths=paths, python=python, host_python=host_python,
                         tags={"dtrain.allow": ",".join(sorted(set(allow)))} if allow else {})


def load(path: str, sets, allow=None):
    """A spec, validated, its warnings printed (every error at once is a SpecError: exit 2); `allow`: the
    --allow codes whose rules are waived."""
    from ..output import print_diagnostics
    from ..spec.validate import load_spec

    spec, diags = load_spec(path, sets, allow=allow)
    print_diagnostics([d for d in diags if d.severity != "note"])
    return spec


def emit(obj, output: str) -> None:
    """One document (json) or its items one per line (jsonl; a lone object is one line)."""
    from ..output import out_json, out_jsonl

    if output == "jsonl":
        for item in (obj if isinstance(obj, list) else [obj]):
            out_jsonl(item)
    else:
        out_json(obj)
