"""Backends: where a job runs. Imported lazily by name so that the Azure SDK loads only when used, and
the local backend (Linux only) only when a local job is involved."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from ..errors import UsageError
from .base import Backend, Notify
from .names import valid_job_name
from ..settings import current

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
    return (current().home / "jobs" / name / "state.json").is_file()


# --- the registry: kinds of backend by name ---------------------------------------------------------

@dataclass(frozen=True)
class BackendKind:
    """A kind of backend the runner can use. factory(notify=..., subscription=..., resource_group=...,
    workspace=...) makes one (workspace flags only where `workspace_flags`); holds(name) says cheaply,
    without making one, whether this machine holds a job of that name (routing by name)."""

    name: str
    factory: Callable[..., Backend]
    holds: Callable[[str], bool] | None = None
    workspace_flags: bool = False


def _local(notify: Notify | None = None, **_) -> Backend:
    require_local_platform()
    from .local import LocalBackend

    return LocalBackend(notify=notify)


def _azure(notify: Notify | None = None, **flags) -> Backend:
    from .azure.backend import AzureBackend

    return AzureBackend(notify=notify, **flags)


LOCAL, AZURE = "local", "azureml"
_REGISTRY: dict[str, BackendKind] = {
    LOCAL: BackendKind(LOCAL, _local, holds=local_job_exists),
    AZURE: BackendKind(AZURE, _azure, workspace_flags=True),
}


def register_backend(kind: BackendKind) -> BackendKind | None:
    """Add or replace a kind (a plug-in, or a test's fake standing in for "local" or "azureml"); returns
    the one it replaced, for the caller to put back."""
    old = _REGISTRY.get(kind.name)
    _REGISTRY[kind.name] = kind
    return old


def unregister_backend(name: str, previous: BackendKind | None = None) -> None:
    if previous is not None:
        _REGISTRY[name] = previous
    else:
        _REGISTRY.pop(name, None)


@contextmanager
def registered(kind: BackendKind) -> Iterator[BackendKind]:
    """register_backend for the length of a with block."""
    old = register_backend(kind)
    try:
        yield kind
    finally:
        unregister_backend(kind.name, old)


def backend_kind(name: str) -> BackendKind:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r} (registered: {', '.join(sorted(_REGISTRY))})") from None


def backend_kinds() -> list[BackendKind]:
    return list(_REGISTRY.values())


def get_backend(name: str, *, notify: Notify | None = None, **flags) -> Backend:
    """A new backend of a registered kind. notify(Notice): where its notes go (backends never print)."""
    kind = backend_kind(name)
    return kind.factory(notify=notify, **(flags if kind.workspace_flags else {}))
