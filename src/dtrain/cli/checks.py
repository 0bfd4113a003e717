"""The usage checks every command shares: values out of range, and flags that would do nothing in the
combination given (a usage error, exit 2, never silently ignored)."""
from __future__ import annotations

from ..errors import UsageError

# Every command takes the same --output values (docs/monitoring.md): text, json (one document),
# jsonl (one compact object per line); `logs` alone streams, so it takes text or jsonl.
OUTPUTS = ("text", "json", "jsonl")


def check_output(value: str, allowed=OUTPUTS, hint: str | None = None) -> str:
    if value not in allowed:
        raise UsageError(f"--output must be one of {', '.join(allowed)}, not '{value}'", hint=hint)
    return value


def check_timeout(timeout) -> None:
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {timeout:g}")


def check_positive(flag: str, value, what: str = "a positive number") -> None:
    if value is not None and value <= 0:
        raise UsageError(f"{flag} must be {what}, not {value:g}")


def useless(flag: str, given, why: str) -> None:
    """A flag that would do nothing in this combination is a usage error, not silently ignored."""
    if given:
        raise UsageError(f"{flag} {why}", hint="drop it, or see `dtrain COMMAND --help`")


def useless_all(flags: list, why: str) -> None:
    """Several flags that would do nothing: one error naming them all."""
    useless(", ".join(flags), flags, f"{'does' if len(flags) == 1 else 'do'} nothing with {why}")


def pairs(items, flag: str, bare_ok: bool = False) -> dict:
    """NAME=VALUE flags; with bare_ok a lone NAME means "has this key" (value None), as Azure's tag filter."""
    got: dict = {}
    for item in items or []:
        if "=" not in item:
            if bare_ok and item.strip():
                got[item.strip()] = None
                continue
            raise UsageError(f"{flag} '{item}' has no '='", hint=f"write {flag} NAME=VALUE")
        k, _, v = item.partition("=")
        got[k.strip()] = v
    return got
