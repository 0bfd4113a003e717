"""Numbers from the environment (DTRAIN_* tuning variables), read the same way by every backend."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError


def env_float(name: str, default: float, environ=None) -> float:
    """The variable as a number, `default` when unset; anything else is a configuration error (exit 6)."""
    env = os.environ if environ is None else environ
    try:
        return float(env.get(name, default))
    except ValueError:
        raise ConfigError(f"{name} must be a number, not '{env.get(name)}'") from None


def dtrain_home(environ=None) -> Path:
    """$DTRAIN_HOME (default ~/.dtrain), unchecked: local jobs, local datastores and the job index."""
    env = os.environ if environ is None else environ
    return Path(env.get("DTRAIN_HOME") or Path.home() / ".dtrain").expanduser()
