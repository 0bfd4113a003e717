"""Numbers from the environment (DTRAIN_* tuning variables), read the same way by every backend."""
from __future__ import annotations

import os

from ..errors import ConfigError


def env_float(name: str, default: float, environ=None) -> float:
    """The variable as a number, `default` when unset; anything else is a configuration error (exit 6)."""
    env = os.environ if environ is None else environ
    try:
        return float(env.get(name, default))
    except ValueError:
        raise ConfigError(f"{name} must be a number, not '{env.get(name)}'") from None
