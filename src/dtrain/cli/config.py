"""`dtrain config`: the Azure ML workspace the job commands use, and where each part came from."""
from __future__ import annotations

import sys

from .app import app
from .options import Output, ResourceGroup, Subscription, WorkspaceName, check_output, runner, workspace


@app.command("config")
def config_(
    output: Output = "text",
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Show the Azure ML workspace the job commands use, and where each part of it came from (flags,
    variables, config.json, AZUREML_ARM_*, az defaults). Exit 6 when a part is missing."""
    from ..errors import ConfigError
    from ..output import out, out_json, shown
    from ..runner import WORKSPACE_PARTS as PARTS

    check_output(output)
    r = runner(workspace(subscription, resource_group, workspace_)).workspace_resolution()
    if output == "json":
        out_json(r.to_dict())
    else:
        width = max(len(r.values.get(p) or "-") for p in PARTS)
        for p in PARTS:
            out(f"{p:<16} {shown(r.values.get(p) or '-', sys.stdout).ljust(width)}  "
                f"{shown(r.sources.get(p) or 'missing', sys.stdout)}")
    if r.missing:
        raise ConfigError(r.missing_message(), hint="see docs/azure.md, Workspace")
