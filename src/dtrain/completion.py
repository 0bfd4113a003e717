"""Shell completion candidates that need more than the command tree: template names (`init -t`) and
local job names (status/logs/cancel/wait). Called only while a shell completes (typer's
_DTRAIN_COMPLETE protocol), never on an ordinary run; both are a folder listing, no job is read."""
from __future__ import annotations

import os
from pathlib import Path


def _jobs_root() -> Path:
    from .settings import current   # without importing the local backend

    return current().home / "jobs"


def local_job_names(incomplete: str) -> list[str]:
    try:
        entries = [e for e in os.scandir(_jobs_root())
                   if e.is_dir() and not e.name.startswith(".") and e.name.startswith(incomplete)]
    except OSError:
        return []
    entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)   # newest first, as `dtrain list`
    return [e.name for e in entries]


def template_names(incomplete: str) -> list[tuple[str, str]]:
    try:
        from .templates import all_templates

        return [(t.name, t.summary) for t in all_templates() if t.name.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - a completion never fails loudly
        return []
