"""Everything dtrain prints, the one way out. Human text goes to stderr, names and JSON to stdout, so
`name=$(dtrain submit ...)` and `dtrain status X --output json | jq` work in scripts.

Every line passes through untrusted.py on its way out, whoever wrote it: secrets are redacted (the token
in use, Bearer ..., sig=, AccountKey=, ...), and in CI no runner command survives (`##vso[`, a leading
`::`). Text that comes from a job or the service is also shown with its control characters escaped on a
terminal (`shown`, `out_log`); a job's log lines go to a pipe or file byte-exact (outside CI)."""
from __future__ import annotations

import json
import os
import re
import sys

_COLORS = {"error": "31", "warning": "33", "note": "36", "hint": "2", "bold": "1"}
RANK_COLORS = ("36", "32", "35", "33", "34", "96", "92", "95")
_VSO_JSON = re.compile(r"(?<=#)#(?=(?:vso)?\[)", re.IGNORECASE)


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


def _raw(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise PipeClosed() from None


def _write(stream, text: str) -> None:
    """Every line dtrain prints: redacted, and in CI with no runner command left."""
    from .untrusted import ci_kind, neutralize_commands, redact

    _raw(stream, neutralize_commands(redact(text), ci_kind()))


def shown(text, stream=None) -> str:
    """Text from a job or the service, as it may be shown: control characters escaped on a terminal
    (as `cat -v` does), so no escape sequence, title or hyperlink acts; as it is elsewhere."""
    from .untrusted import for_terminal

    stream = stream or sys.stderr
    text = "" if text is None else str(text)
    return for_terminal(text) if hasattr(stream, "isatty") and stream.isatty() else text


def out_log(prefix: str, text: str) -> None:
    """One line a job wrote (logs, the submit --wait stream): byte-exact to a pipe or file, escaped on a
    terminal, redacted and with runner commands neutralized in CI (untrusted.safe_line)."""
    from .untrusted import Destination

    _raw(sys.stdout, prefix + Destination.of(sys.stdout).safe(text, job_output=True) + "\n")


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


def _redacted(obj):
    """Every string in a JSON-able value redacted (before encoding: in JSON text a newline is `\\n`,
    which would hide where a secret starts)."""
    from .untrusted import redact

    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: _redacted(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_redacted(v) for v in obj]
    return obj


def _json(obj, **kw) -> str:
    """A JSON document, redacted; in CI a `##` that would start a runner command is written as `#\\u0023`
    (the same string to a JSON reader, no command to the runner)."""
    from .untrusted import ci_kind

    text = json.dumps(_redacted(obj), default=str, **kw)
    return _VSO_JSON.sub(r"\\u0023", text) if ci_kind() else text


def out_chunks(chunks, end: str = "", *, json_text: bool = False) -> None:
    """A long document written piece by piece (metrics of a million points), each piece through the one
    way out as any line is (json_text: as JSON text is, see _json); nothing holds the whole text."""
    from .untrusted import ci_kind, redact

    ci = ci_kind()
    for piece in chunks:
        if json_text:
            piece = redact(piece)
            _raw(sys.stdout, _VSO_JSON.sub(r"\\u0023", piece) if ci else piece)
        else:
            _write(sys.stdout, piece)
    if end:
        _raw(sys.stdout, end)


def out_json(obj) -> None:
    _raw(sys.stdout, _json(obj, indent=2) + "\n")


def out_jsonl(obj) -> None:
    _raw(sys.stdout, _json(obj, separators=(",", ":")) + "\n")


def error(message: str, hint: str | None = None) -> None:
    err(f"{paint('error', _COLORS['error'])}: {shown(message)}")
    if hint:
        err(f"  {paint('hint', _COLORS['hint'])}: {shown(hint)}")


def warning(message: str, hint: str | None = None) -> None:
    err(f"{paint('warning', _COLORS['warning'])}: {shown(message)}")
    if hint:
        err(f"  {paint('hint', _COLORS['hint'])}: {shown(hint)}")


def note(message: str) -> None:
    err(f"{paint('note', _COLORS['note'])}: {shown(message)}")


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
