"""Whether an Azure ML workspace is configured, decided without importing the Azure SDK.

Order, as MLClient.from_config users expect: flags, then DTRAIN_*/AZURE_* variables, then an Azure ML
config.json found upward from the current folder (or in .azureml/)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV_SUBSCRIPTION = ("DTRAIN_SUBSCRIPTION_ID", "AZURE_SUBSCRIPTION_ID")
ENV_RESOURCE_GROUP = ("DTRAIN_RESOURCE_GROUP", "AZURE_RESOURCE_GROUP", "AZUREML_RESOURCE_GROUP")
ENV_WORKSPACE = ("DTRAIN_WORKSPACE", "AZUREML_WORKSPACE_NAME", "AZURE_ML_WORKSPACE")


@dataclass(frozen=True)
class Workspace:
    subscription_id: str
    resource_group: str
    workspace_name: str
    source: str  # where it came from, for messages


def _env(names) -> tuple[str | None, str | None]:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v, n
    return None, None


def find_config_json(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        for candidate in (d / "config.json", d / ".azureml" / "config.json"):
            if candidate.is_file():
                try:
                    data = json.loads(candidate.read_text())
                except (OSError, ValueError):
                    continue
                if isinstance(data, dict) and "subscription_id" in data:
                    return candidate
    return None


def resolve(subscription: str | None = None, resource_group: str | None = None,
            workspace: str | None = None) -> tuple[Workspace | None, list[str]]:
    """(workspace, missing names). Flags win over variables, variables over config.json."""
    sub, rg, ws = subscription, resource_group, workspace
    src = "flags" if any((sub, rg, ws)) else None
    if not sub:
        sub, n = _env(ENV_SUBSCRIPTION)
        src = src or (n and "environment")
    if not rg:
        rg, n = _env(ENV_RESOURCE_GROUP)
        src = src or (n and "environment")
    if not ws:
        ws, n = _env(ENV_WORKSPACE)
        src = src or (n and "environment")
    if not (sub and rg and ws):
        cfg = find_config_json()
        if cfg is not None:
            data = json.loads(cfg.read_text())
            sub = sub or data.get("subscription_id")
            rg = rg or data.get("resource_group")
            ws = ws or data.get("workspace_name")
            src = src or str(cfg)
    missing = [label for label, v in (("subscription id (--subscription or DTRAIN_SUBSCRIPTION_ID)", sub),
                                      ("resource group (--resource-group or DTRAIN_RESOURCE_GROUP)", rg),
                                      ("workspace name (--workspace or DTRAIN_WORKSPACE)", ws)) if not v]
    if missing:
        return None, missing
    return Workspace(sub, rg, ws, src or "?"), []


def azure_configured() -> bool:
    ws, _ = resolve()
    return ws is not None
