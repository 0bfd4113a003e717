"""The Azure ML workspace a command names: one typed value, whatever the command."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workspace:
    """The Azure ML workspace a command names with its flags (each part optional: the rest comes from
    variables, config.json and az's defaults, backends/azure/workspace.py). One typed value, resolved once."""

    subscription: str | None = None
    resource_group: str | None = None
    workspace: str | None = None

    def given(self) -> list[str]:
        """The flags given, as the command line spells them."""
        return [f for f, v in (("--subscription", self.subscription), ("--resource-group", self.resource_group),
                               ("--workspace", self.workspace)) if v]

    def flags(self, recorded: dict | None = None) -> dict:
        """The backend's keyword arguments: these parts, with a job's recorded workspace filling the parts
        no flag gave (flags win, part by part)."""
        rec = recorded or {}
        return {"subscription": self.subscription or rec.get("subscription_id"),
                "resource_group": self.resource_group or rec.get("resource_group"),
                "workspace": self.workspace or rec.get("workspace_name")}
