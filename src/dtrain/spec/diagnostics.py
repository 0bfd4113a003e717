"""Diagnostics: one problem in a spec, with where it is and how to fix it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Diagnostic:
    severity: str          # "error" | "warning" | "note"
    message: str
    path: tuple = ()
    file: str | None = None
    line: int | None = None   # 1-based
    column: int | None = None  # 1-based
    hint: str | None = None
    code: str = ""          # stable short id, e.g. "unknown-key", for JSON output and tests
    redact: bool = False    # the source line holds a secret: printers must not echo it

    def location(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def dotted_path(self) -> str:
        return dotted(self.path)

    def to_dict(self) -> dict:
        return {
            "severity": self.severity, "code": self.code, "message": self.message,
            "path": self.dotted_path(), "file": self.file, "line": self.line,
            "column": self.column, "hint": self.hint,
        }


def dotted(path: tuple) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


@dataclass
class Collector:
    """Accumulates diagnostics, resolving each path to a file:line through the loader's location map."""

    file: str | None = None
    locations: dict = field(default_factory=dict)
    items: list = field(default_factory=list)
    coercions: list = field(default_factory=list)   # (path, value) the validator normalised, e.g. "2" -> 2

    def _where(self, path: tuple):
        # Fall back to the nearest ancestor that has a location (e.g. a missing key -> its parent mapping).
        p = tuple(path)
        while True:
            if p in self.locations:
                return self.locations[p]
            if not p:
                return (None, None)
            p = p[:-1]

    def add(self, severity: str, path: tuple, message: str, *, hint: str | None = None, code: str = "",
            redact: bool = False) -> None:
        loc = self._where(path)
        if isinstance(loc, str):  # a value that came from the command line (--set)
            if redact:
                loc = loc.partition("=")[0] + "=***"
            self.items.append(Diagnostic(severity, message, tuple(path), loc, None, None, hint, code, redact))
            return
        line, col = loc
        self.items.append(Diagnostic(severity, message, tuple(path), self.file, line, col, hint, code, redact))

    def error(self, path, message, *, hint=None, code=""):
        self.add("error", path, message, hint=hint, code=code)

    def warning(self, path, message, *, hint=None, code="", redact=False):
        self.add("warning", path, message, hint=hint, code=code, redact=redact)

    def note(self, path, message, *, hint=None, code=""):
        self.add("note", path, message, hint=hint, code=code)

    @property
    def errors(self):
        return [d for d in self.items if d.severity == "error"]

    def sorted(self):
        order = {"error": 0, "warning": 1, "note": 2}
        return sorted(self.items, key=lambda d: (d.line if d.line is not None else 10**9, order[d.severity]))
