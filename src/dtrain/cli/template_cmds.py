"""Commands that start a project: templates, init."""
from __future__ import annotations

from typing import Optional

import typer

from ..completion import template_names
from .app import app
from .options import Output, check_output, emit


@app.command()
def templates(output: Output = "text"):
    """List the job templates, one line each, and under it what its job needs on this machine beyond dtrain
    (an extra to pip install; Open MPI's mpirun for mpi)."""
    from .. import templates as t
    from ..output import out

    check_output(output)
    ts = t.all_templates()
    if output != "text":
        emit([x.to_dict() for x in ts], output)
        return
    width = max(len(x.name) for x in ts)
    for x in ts:
        shape = f"{x.nodes}x{x.processes_per_node}"
        out(f"{x.name.ljust(width)}  {x.framework:<10} {shape:<5} {x.instance_type or '-':<26} {x.summary}")
        if x.needs:
            out(f"{'':{width}}  needs here: {'; '.join(x.needs)}")


@app.command()
def init(
    directory: str = typer.Argument(..., metavar="DIR"),
    template: str = typer.Option(..., "--template", "-t", help="Template name (see `dtrain templates`).",
                                 autocompletion=template_names),
    instance_type: Optional[str] = typer.Option(None, "--instance-type", help="Azure VM size; processes per "
                                                "node follow its GPU count."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Number of nodes (resources.instance_count)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing job.yml and src/ files."),
):
    """Write DIR/job.yml (a commented spec) and DIR/src/ (the training script) from a template."""
    from pathlib import Path

    from .. import templates as t
    from ..output import err, note, out

    written = t.init(Path(directory), template, instance_type, nodes, force)
    for p in written:
        out(str(p))
    size_note = t.size_note(instance_type)
    if size_note:
        note(size_note)
    err(f"next: dtrain validate {written[0]} && dtrain submit {written[0]} --local --wait")
