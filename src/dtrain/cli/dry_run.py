"""`submit --dry-run`: what would be sent and what it may cost; on Azure ML, whether it builds a new image
and, with workspace flags, whether it can ever start (the checks submit makes, docs/capacity.md). Sends
nothing: a job that can never start exits 2, as submit would."""
from __future__ import annotations

from .options import runner, submit_options


def dry_run(spec_obj, *, is_local: bool, ws, name, inputs, allow, python, host_python) -> None:
    from ..output import note
    from .cost import dry_run_line
    from .spec_cmds import print_rendered

    dry_run_line(spec_obj, local=is_local, ws=ws)
    print_rendered(spec_obj, local=is_local, format="yaml", name=name, inputs=inputs, python=python,
                   host_python=host_python)
    if is_local:
        return
    if isinstance(spec_obj.environment, dict) or spec_obj.environment_file():
        build = runner(ws).image_build(spec_obj, submit_options(name, inputs, allow))
        if build:
            note(build)
    if ws.given():                          # as validate: the workspace flags ask for the reads
        for text in runner(ws).preflight(spec_obj, submit_options(name, inputs, allow)):
            note(text)
