"""The ignore file Azure ML honours, for code snapshots and content hashes alike.

Azure ML (azure-ai-ml `get_ignore_file`) reads ONE ignore file, in the root of the code folder:
`.amlignore` when it exists, else `.gitignore`. Patterns follow gitignore rules (gitwildmatch), the last
matching pattern wins, and an excluded folder is not descended into (a `!` cannot re-include a file
whose parent folder is excluded, as in git).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

AML_IGNORE = ".amlignore"
GIT_IGNORE = ".gitignore"


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern
    negate: bool
    dir_only: bool
    source: str


def _translate(glob: str) -> str:
    """A gitignore glob (without leading/trailing slash handling) as a regex over a '/'-separated path."""
    out = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob[i:i + 2] == "**":
                # '**/' = zero or more folders; '/**' at the end = everything inside; other '**' = '*'
                before_ok = i == 0 or glob[i - 1] == "/"
                after = glob[i + 2:i + 3]
                if before_ok and after == "/":
                    out.append("(?:[^/]*/)*")
                    i += 3
                    continue
                if before_ok and i + 2 == n:
                    out.append(".*")
                    i += 2
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "^") else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse(lines) -> list[_Pattern]:
    pats = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        # trailing spaces are ignored unless escaped
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(line) > len(stripped):
            stripped += " "
        line = stripped
        if not line or line.startswith("#"):
            continue
        negate = False
        if line.startswith("!"):
            negate, line = True, line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        prefix = "" if anchored else "(?:.*/)?"
        pats.append(_Pattern(re.compile(f"^{prefix}{body}$"), negate, dir_only, raw.strip()))
    return pats


class IgnoreRules:
    def __init__(self, patterns: list[_Pattern] | None = None, source: Path | None = None):
        self.patterns = patterns or []
        self.source = source

    @classmethod
    def for_folder(cls, root: Path) -> "IgnoreRules":
        for name in (AML_IGNORE, GIT_IGNORE):
            p = Path(root) / name
            if p.is_file():
                return cls(parse(p.read_text(encoding="utf-8", errors="replace").splitlines()), p)
        return cls()

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """rel: path relative to the root, '/'-separated. The last matching pattern decides."""
        result = False
        for p in self.patterns:
            if p.dir_only and not is_dir:
                continue
            if p.regex.match(rel):
                result = not p.negate
        return result
