"""ISO 8601 times as the services and dtrain's own records write them ("2026-11-25T14:37:33.123Z",
"...+00:00", a datetime from the SDK): one reader for all. A time without a zone is UTC, as Azure ML's are."""
from __future__ import annotations

from datetime import datetime, timezone


def parse_time(value) -> datetime | None:
    """An aware datetime; None for nothing, or for text that is not such a time."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not value:
        return None
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def epoch(value) -> float | None:
    """Seconds since the epoch, or None (parse_time)."""
    t = parse_time(value)
    return t.timestamp() if t else None
