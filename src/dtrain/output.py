"""Everything dtrain prints. Human text goes to stderr, names and JSON to stdout, so
`name=$(dtrain submit ...)` and `dtrain status X --output json | jq` work in scripts."""
from __future__ import annotations

import json
import os
import sys

_COLORS = {"error": "31", "warning": "33", "note": "36", "hint": "2", "bold": "1"}
RANK_COLORS = ("36", "32", "35", "33", "34", "96", "92", "95")


def color_enabled(stream=None) -> bool:
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, code: str, stream=None) -> str:
    return f"\033[{code}m{text}\033[0m" if color_enabled(stream) else text


class PipeClosed(Exception):
    """The reader of stdout (or stderr) went away: `dtrain logs X | head`. Not an OSError on purpose,
    so that it passes click's own EPIPE handling (exit 1) and reaches cli.main(), which ends quietly
    with 0 (docs/exit-codes.md)."""


def _write(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise PipeClosed() from None


class PipeSafe:
    """A stream for libraries that write on their own (rich): EPIPE becomes PipeClosed."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        _write(self._stream, text)
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def err(text: str = "") -> None:
    _write(sys.stderr, f"{text}\n")


def out(text: str = "") -> None:
    _write(sys.stdout, f"{text}\n")


def out_json(obj) -> None:
    _write(sys.stdout, json.dumps(obj, indent=2, default=str) + "\n")


def out_jsonl(obj) -> None:
    _write(sys.stdout, json.dumps(obj, default=str, separators=(",", ":")) + "\n")


def error(message: str, hint: str | None = None) -> None:
    err(f"{paint('error', _COLORS['error'])}: {message}")
    if hint:
        err(f"  {paint('hint', _COLORS['hint'])}: {hint}")


def note(message: str) -> None:
    err(f"{paint('note', _COLORS['note'])}: {message}")


def print_diagnostic(d, source_lines: dict) -> None:
    """file:line:col: severity: message, the source line with a caret, and the hint: compiler style."""
    sev = paint(d.severity, _COLORS[d.severity])
    err(f"{d.location()}: {sev}: {d.message}" + (f" [{d.code}]" if d.code else ""))
    lines = source_lines.get(d.file)
    if lines is None and d.file and d.line:
        try:
            with open(d.file, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        source_lines[d.file] = lines
    if lines and d.line and d.line <= len(lines) and not getattr(d, "redact", False):
        gutter = f"{d.line:>5} | "
        err(gutter + lines[d.line - 1])
        if d.column:
            err(" " * (len(gutter) - 2) + "| " + " " * (d.column - 1) + paint("^", _COLORS[d.severity]))
    if d.hint:
        err(f"      {paint('hint', _COLORS['hint'])}: {d.hint}")


def print_diagnostics(diags) -> None:
    cache: dict = {}
    for d in diags:
        print_diagnostic(d, cache)


def summary_line(diags) -> str:
    e = sum(1 for d in diags if d.severity == "error")
    w = sum(1 for d in diags if d.severity == "warning")
    return f"{e} error{'s' if e != 1 else ''}, {w} warning{'s' if w != 1 else ''}"


def log_prefix(line, width: int = 0, stream=None) -> str:
    if line.rank is None:
        return ""
    tag = f"{'n' + str(line.node) + '/' if line.node is not None else ''}r{line.rank}"
    tag = tag.ljust(width)
    return paint(tag, RANK_COLORS[line.rank % len(RANK_COLORS)], stream or sys.stdout) + " | "
