"""Commands over a spec alone, offline: validate, render, schema."""
from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import UsageError
from ..exitcodes import ExitCode
from .app import app
from .options import Allow, Inputs, Output, Sets, check_output, emit, load, runner, submit_options, useless


@app.command()
def validate(
    specs: List[str] = typer.Argument(..., metavar="SPEC...", help="Job YAML files."),
    set_: Sets = None,
    output: Output = "text",
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors (exit 2)."),
    allow: Allow = None,
    env: bool = typer.Option(False, "--env", help="Also check the job's environment: the conda file, its pip "
                             "pins resolved for its Python on Linux x86_64, the code's imports "
                             "(docs/environments.md)."),
):
    """Check job specs offline: every problem at once, with file:line and a fix. Exit 2 on errors."""
    from ..output import err, print_diagnostics, summary_line

    from ..untrusted import in_ci as ci_detected

    # ci (and the backend types it imports) is loaded only inside a CI, to keep validate's start-up lean
    in_ci = ci_detected()
    from ..spec.validate import check_allow

    check_output(output)
    check_allow(allow)                      # a code that cannot be waived: one usage error, not one per file
    results = [_validate_one(path, set_, strict, in_ci, allow, env) for path in specs]
    if output == "text":
        for r, diags in results:
            print_diagnostics(diags)
            err(f"{r['file']}: {'ok' if r['valid'] else 'invalid'} ({summary_line(diags)})")
    else:
        docs = [r for r, _ in results]
        emit(docs if len(docs) > 1 or output == "jsonl" else docs[0], output)
    raise typer.Exit(ExitCode.OK if all(r["valid"] for r, _ in results) else ExitCode.INVALID)


def _validate_one(path: str, sets, strict: bool, in_ci: bool, allow=None, env: bool = False):
    from ..errors import SpecError
    from ..spec.diagnostics import Diagnostic
    from ..spec.validate import load_spec

    try:
        spec, diags = load_spec(path, sets, allow=allow)
        if env:
            from ..envcheck.check import check_environment

            diags = diags + check_environment(spec, lookup=lambda ref: runner().read_environment(ref))
        ok = not any(d.severity == "error" for d in diags)
        ok = ok and not (strict and any(d.severity == "warning" for d in diags))
    except SpecError as exc:
        diags, ok = exc.diagnostics, False
    except UsageError as exc:       # a missing or unreadable file: that file is invalid, the rest go on
        diags = [Diagnostic("error", exc.message, file=path, hint=exc.hint, code="unreadable-file")]
        ok = False
    if in_ci:  # on the PR's lines in GitHub Actions / Azure Pipelines; stderr
        from ..ci import annotate_diagnostics

        annotate_diagnostics(diags)
    return {"file": path, "valid": ok, "diagnostics": [d.to_dict() for d in diags]}, diags


@app.command()
def render(
    spec: str = typer.Argument(..., metavar="SPEC"),
    format: Optional[str] = typer.Option(None, "--format", help="yaml (the default; for az ml job create "
                                         "--file) or rest (the whole JSON body of the job PUT: "
                                         "{\"properties\": {...}})."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="The same as --format (as every command "
                                         "names its output)."),
    set_: Sets = None,
    local: bool = typer.Option(False, "--local", help="Print the local backend's plan instead: every "
                               "process with its command and environment."),
    name: Optional[str] = typer.Option(None, "--name", help="Job name to render with."),
    input_: Inputs = None,
    allow: Allow = None,
):
    """Print exactly what would be submitted. No side effects: the same output every time (a local plan
    shows its ports, and a generated name, as placeholders that submit fills in)."""
    flag = "--format" if format is not None else "--output"
    useless("--output", format is not None and output is not None, "is --format: give one of them")
    format = format if format is not None else output
    if format not in (None, "yaml", "rest"):
        raise UsageError(f"{flag} must be yaml or rest, not '{format}'")
    useless(flag, local and format, "does not apply with --local, which prints the local plan as JSON")
    useless("--input", input_ and not local, "only applies with --local (a local path for an input)")
    print_rendered(load(spec, set_, allow), local=local, format=format or "yaml", name=name, inputs=input_)


def print_rendered(spec_obj, *, local: bool, format: str, name, inputs, python=None, host_python=False) -> None:
    """What `render` prints, and `submit --dry-run` too: the local plan as JSON, or the Azure job (YAML
    or the REST body), rendered without loading the Azure SDK."""
    from ..output import out, out_json

    r = runner()
    if local:
        out_json(r.plan(spec_obj, submit_options(name, inputs, python=python, host_python=host_python), local=True).to_dict())
    elif format == "rest":
        out_json(r.render_azure(spec_obj, format="rest", name=name))
    else:
        out(r.render_azure(spec_obj, format="yaml", name=name))


@app.command()
def schema():
    """Print the JSON Schema of the job spec (for editor completion)."""
    from ..output import out_json
    from ..spec.schema import json_schema

    out_json(json_schema())
