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


def err(text: str = "") -> None:
    print(text, file=sys.stderr, flush=True)


def out(text: str = "") -> None:
    print(text, file=sys.stdout, flush=True)


def out_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=str), flush=True)


def out_jsonl(obj) -> None:
    print(json.dumps(obj, default=str, separators=(",", ":")), flush=True)


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
