"""Which backend owns each job submitted from this machine, recorded at submit, so that status, logs,
cancel and wait go straight to it: $DTRAIN_HOME/index/<name>.json.

Local jobs need no entry (their own folder, $DTRAIN_HOME/jobs/<name>/, says so). An Azure job's entry
holds the workspace it went to (no secret: subscription, resource group, workspace name), so
`dtrain status NAME` finds it without the flags it was submitted with. Written atomically; an entry
that cannot be written or read is as if there were none (the job is still found with the flags)."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from .backends.names import valid_job_name
from .settings import current


def _path(name: str, kind: str = "") -> Path:
    return current().home / "index" / kind / f"{name}.json"


def record(name: str, backend: str, workspace: dict | None = None, *, kind: str = "") -> None:
    """kind "": a job; "groups": a grid's group (submit --matrix --name G), so that `status G` knows G."""
    if not valid_job_name(name):
        return
    entry = {"backend": backend, "workspace": {k: v for k, v in (workspace or {}).items() if v}}
    path = _path(name, kind)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, sort_keys=True)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def lookup(name: str, *, kind: str = "") -> dict | None:
    """{"backend": "azureml", "workspace": {...}} for a job (or with kind "groups", a grid) recorded here,
    else None."""
    if not valid_job_name(name):
        return None
    try:
        entry = json.loads(_path(name, kind).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("workspace", {}), dict):
        return None
    return entry
