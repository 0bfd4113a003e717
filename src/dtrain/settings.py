"""dtrain's settings: every DTRAIN_* variable, its default and what it means, read in this one place.

`current()` is a typed view of the process environment, read when a value is asked for (so a bad
DTRAIN_AZURE_POLL_CAP_S breaks the commands that poll Azure, not `dtrain validate`). Tests pass their own
mapping: `Settings({"DTRAIN_HOME": ...})`. docs/configuration.md lists the same names (tests/test_docs.py).
The workspace variables (DTRAIN_SUBSCRIPTION_ID, ...) are here for the table; their precedence against
flags and config.json lives in backends/azure/workspace.py.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


@dataclass(frozen=True)
class Var:
    name: str
    default: float | str | None
    doc: str
    internal: bool = False      # set by dtrain for its own processes, never by a user


VARS: dict[str, Var] = {v.name: v for v in (
    Var("DTRAIN_HOME", "~/.dtrain", "local jobs, local datastores, chains, locks and the Azure job index"),
    Var("DTRAIN_LOCAL_PYTHON", None, "the interpreter a local job's `python` is (as submit --python)"),
    Var("DTRAIN_LOCAL_GRACE_S", 5.0, "seconds between SIGTERM and SIGKILL when a local job is stopped"),
    Var("DTRAIN_LOCAL_SAMPLE_S", 5.0, "seconds between two samples of a local job's processes (dtrain top); 0: none"),
    Var("DTRAIN_RETRY_BACKOFF_S", 30.0, "a retry chain's wait before its second attempt, doubling after"),
    Var("DTRAIN_CODE_LIMIT_MB", 1024.0, "the largest code folder submit accepts, in MB"),
    Var("DTRAIN_ARM_ENDPOINT", None, "resource-manager endpoint (sovereign clouds, or an emulator)"),
    Var("DTRAIN_STORAGE_SUFFIX", "core.windows.net", "storage suffix of that cloud"),
    Var("DTRAIN_STORAGE_ENDPOINT", None, "a loopback storage emulator reaching every account path-style"),
    Var("DTRAIN_ARM_TOKEN", None, "a static bearer token, loopback endpoints only"),
    Var("DTRAIN_ARM_TOKEN_FILE", None, "a file holding such a token, loopback endpoints only"),
    Var("DTRAIN_AZURE_RETRIES", 5.0, "azure-core retries per HTTP call"),
    Var("DTRAIN_AZURE_RETRY_BACKOFF_S", 0.8, "azure-core backoff factor"),
    Var("DTRAIN_AZURE_STATUS_ATTEMPTS", 4.0, "status reads before dtrain says it lost track (exit 7)"),
    Var("DTRAIN_AZURE_POLL_CAP_S", 10.0, "longest wait between status polls"),
    Var("DTRAIN_AZURE_LOG_POLL_S", 0.5, "log polling while lines flow"),
    Var("DTRAIN_AZURE_LOG_POLL_CAP_S", 5.0, "log polling when idle"),
    Var("DTRAIN_AZURE_CANCEL_WAIT_S", 120.0, "how long cancel waits for Azure to confirm"),
    Var("DTRAIN_AZURE_CAPACITY_TTL_S", 30.0, "how long a read of the target compute and the region's quota is reused"),
    Var("DTRAIN_REGION", "eastus", "the Azure region jobs are priced in (`--region` wins)"),
    Var("DTRAIN_PRICES_URL", "https://prices.azure.com/api/retail/prices", "the Azure Retail Prices API dtrain cost asks"),
    Var("DTRAIN_PRICES_OFFLINE", None, "1: never ask the Retail Prices API (cache and the shipped snapshot only)"),
    Var("DTRAIN_SUBSCRIPTION_ID", None, "the workspace's subscription"),
    Var("DTRAIN_RESOURCE_GROUP", None, "the workspace's resource group"),
    Var("DTRAIN_WORKSPACE", None, "the workspace's name"),
    Var("DTRAIN_LOCAL_JOB", None, "the token every process of a local job carries", internal=True),
    Var("DTRAIN_LOCAL_SUPERVISOR", None, "carried by a local job's supervisor and watchdog", internal=True),
)}


class Settings:
    """A typed view of one environment mapping; every value is read and checked when asked for."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if environ is None else environ

    def text(self, name: str) -> str | None:
        """The variable's value, its default when unset or empty."""
        default = VARS[name].default     # KeyError: a name missing from the table above
        return self._env.get(name) or (None if default is None else str(default))

    def given(self, name: str) -> str | None:
        """The variable's value as set, None when unset or empty (its default not applied)."""
        VARS[name]
        return self._env.get(name) or None

    def number(self, name: str) -> float:
        """The variable as a number; anything else is a configuration error (exit 6)."""
        raw = self.text(name)
        try:
            return float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a number, not '{raw}'",
                              hint="unset it for the default, or see docs/configuration.md") from None

    @property
    def home(self) -> Path:
        """$DTRAIN_HOME (default ~/.dtrain), unchecked (backends/local/store.py checks it is a folder)."""
        return Path(self.text("DTRAIN_HOME") or "~/.dtrain").expanduser()

    @property
    def prices_offline(self) -> bool:
        return (self.text("DTRAIN_PRICES_OFFLINE") or "").strip().lower() in ("1", "true", "yes")

    @property
    def local_grace_s(self) -> float:
        """Lenient on purpose: a job already running must still be stopped, whatever the variable says."""
        try:
            return max(0.0, self.number("DTRAIN_LOCAL_GRACE_S"))
        except ConfigError:
            return float(VARS["DTRAIN_LOCAL_GRACE_S"].default)  # type: ignore[arg-type]

    @property
    def code_limit_bytes(self) -> int:
        raw = self._env.get("DTRAIN_CODE_LIMIT_MB")
        if not raw:
            return int(VARS["DTRAIN_CODE_LIMIT_MB"].default) * 1024 * 1024  # type: ignore[arg-type]
        if not raw.isdigit() or int(raw) <= 0:
            raise ConfigError(f"DTRAIN_CODE_LIMIT_MB={raw!r} is not a positive whole number of megabytes")
        return int(raw) * 1024 * 1024


def current() -> Settings:
    """The settings of this process's environment, as it is now (tests change it with monkeypatch)."""
    return Settings()
