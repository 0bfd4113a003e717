"""Durations on the command line: '5s', '2m', '1h' or plain seconds (`submit --preempt-after`)."""
from __future__ import annotations

import re

from .errors import UsageError

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str = "--preempt-after", hint: str | None = None) -> float:
    """'5s', '2m', '1h' or plain seconds -> seconds, more than 0; else a usage error naming the flag."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    seconds = float(m.group(1)) * _UNITS[m.group(2)] if m else 0.0
    if seconds <= 0:
        raise UsageError(f"{flag} must be a duration such as 5s, 2m or 1h, not '{text}'", hint=hint)
    return seconds
