"""Backends: where a job runs. Imported lazily by name so that the Azure SDK loads only when used, and
the local backend (Linux only) only when a local job is involved."""
from __future__ import annotations

import os
import sys

from ..errors import UsageError
from .base import Backend, Notify
from .names import valid_job_name
from .settings import dtrain_home

# What the local backend needs: flock(2) on state files, /proc to find and identify a job's processes,
# prctl(PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER) so ranks die with their supervisor, process groups.
LOCAL_PLATFORM = "Linux (including WSL 2 and Linux containers)"


def local_platform_problem() -> str | None:
    """Why the local backend cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return f"this is {sys.platform}"
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return "Python's fcntl module is missing"
    if not os.path.isdir("/proc/self"):
        return "/proc is not mounted"
    return None


def require_local_platform() -> None:
    problem = local_platform_problem()
    if problem:
        raise UsageError(f"the local backend runs on {LOCAL_PLATFORM} only; {problem}",
                         hint="submit to Azure ML (without --local), or run dtrain in WSL 2 or a Linux "
                              "container; see docs/local-backend.md")


def local_job_exists(name: str) -> bool:
    """Whether $DTRAIN_HOME holds a local job of this name, read without importing the local backend
    (Azure commands route by name and must work where the local backend cannot load). Same layout as
    local.store: $DTRAIN_HOME (default ~/.dtrain)/jobs/<name>/state.json."""
    if not valid_job_name(name):
        return False
    return (dtrain_home() / "jobs" / name / "state.json").is_file()


def get_backend(name: str, *, notify: Notify | None = None, **options) -> Backend:
    """notify(Notice): where a backend's notes go (backends never print; the local one has none)."""
    if name == "local":
        require_local_platform()
        from .local import LocalBackend

        return LocalBackend()
    if name == "azureml":
        from .azure.backend import AzureBackend

        return AzureBackend(notify=notify, **options)
    raise ValueError(f"unknown backend {name!r}")
