"""The ignore file Azure ML honours, for code snapshots and content hashes alike.

Azure ML (azure-ai-ml `get_ignore_file`) reads ONE ignore file, in the root of the code folder:
`.amlignore` when it exists, else `.gitignore`. Each line is a gitignore pattern, compiled by the
pathspec copy the SDK vendors (azure/ai/ml/_utils/_pathspec.py, pathspec 0.10), and each FILE is matched
on its own: the last matching pattern wins and excluded folders are NOT pruned, so `data/` followed by
`!data/small.csv` keeps data/small.csv (git would not). The SDK cannot tell files from folders: `logs/`
matches what is inside a folder `logs`, never the name `logs` itself.

The patterns are compiled with the `pathspec` library; its gitignore pattern differs from the SDK's
vendored copy in a few bracket and escape details, which `_AzurePattern` puts back (see its docstring).
tests/test_ignorefile.py checks the result against the SDK's own IgnoreFile on generated cases.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from .errors import UsageError

AML_IGNORE = ".amlignore"
GIT_IGNORE = ".gitignore"


class _AzurePattern(GitIgnoreSpecPattern):
    """pathspec's gitignore pattern with the vendored (0.10) glob rules azure-ai-ml matches with:
    `[^a]` is a literal caret (pathspec >= 1 reads it as negation), an unclosed `[` is a literal bracket
    (pathspec >= 1 drops the whole pattern), a trailing backslash makes the pattern invalid, and `!/`
    matches nothing, nor does `/**/` (the vendored copy makes it `^(?:.+/)?/.*$`; pathspec >= 1 matches
    every path)."""

    __slots__ = ()

    @classmethod
    def pattern_to_regex(cls, pattern):
        if isinstance(pattern, str):
            p = pattern.strip()
            if p == "!/":
                return None, None
            segs = p.removeprefix("!").split("/")
            if len(segs) >= 3 and segs[0] == segs[-1] == "" and all(s == "**" for s in segs[1:-1]):
                return None, None       # `/**/`, `/**/**/`: nothing, as in the SDK
        return super().pattern_to_regex(pattern)

    @staticmethod
    def _translate_segment_glob(pattern: str, *_range_error) -> str:
        escape = False
        regex = ""
        i, end = 0, len(pattern)
        while i < end:
            char = pattern[i]
            i += 1
            if escape:
                escape = False
                regex += re.escape(char)
            elif char == "\\":
                escape = True
            elif char == "*":
                regex += "[^/]*"
            elif char == "?":
                regex += "[^/]"
            elif char == "[":
                j = i
                if j < end and pattern[j] == "!":
                    j += 1
                if j < end and pattern[j] == "]":
                    j += 1
                while j < end and pattern[j] != "]":
                    j += 1
                if j < end:
                    j += 1
                    expr = "["
                    if pattern[i] == "!":
                        expr += "^"
                        i += 1
                    elif pattern[i] == "^":
                        expr += "\\^"
                        i += 1
                    regex += expr + pattern[i:j].replace("\\", "\\\\")
                    i = j
                else:
                    regex += "\\["
            else:
                regex += re.escape(char)
        if escape:
            raise ValueError(f"nothing after the escape character in {pattern!r}")
        return regex


def parse(lines, source: str = "ignore file") -> list[_AzurePattern]:
    """Compile ignore-file lines as the SDK does (each line right-stripped, then the pattern stripped).
    A line the SDK cannot compile fails its upload; here it is an error naming the line (exit 2)."""
    pats = []
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\n").rstrip()
        try:
            pat = _AzurePattern(line.strip())
        except (ValueError, re.error) as exc:
            raise UsageError(f"{source}:{n}: invalid pattern {line!r} ({exc})",
                             hint="azure-ai-ml fails the upload on it too; a trailing backslash (an escaped "
                                  "trailing space) is the usual cause") from None
        if pat.include is not None:
            pats.append(pat)
    return pats


class IgnoreRules:
    def __init__(self, patterns: list | None = None, source: Path | None = None, base: Path | None = None):
        self.patterns = patterns or []
        self.source = source
        self.base = base            # the folder paths are made relative to (the ignore file's, resolved)

    @classmethod
    def for_folder(cls, root: Path) -> "IgnoreRules":
        """get_ignore_file: `.amlignore` when it exists, else `.gitignore`, only in the root."""
        for name in (AML_IGNORE, GIT_IGNORE):
            p = Path(root) / name
            if p.exists():
                try:
                    text = p.read_text(encoding="utf-8-sig", errors="replace")
                except OSError as exc:
                    raise UsageError(f"cannot read the ignore file {p}: {exc.strerror or exc}") from None
                return cls(parse(text.splitlines(), str(p)), p, p.resolve().parent)
        return cls(base=Path(root).resolve())

    def excluded_rel(self, rel: str) -> bool:
        """rel: '/'-separated, relative to the root. The last matching pattern decides; folders are not
        special (a path inside an excluded folder can be re-included)."""
        result = False
        for p in self.patterns:
            if p.match_file(rel) is not None:
                result = p.include
        return result

    def excluded(self, path: str | os.PathLike) -> bool:
        """IgnoreFile.is_file_excluded: `path` made relative to the ignore file's folder, as written
        (a path reached through a symlinked folder the SDK has already resolved may start with `../`)."""
        if not self.patterns:
            return False
        rel = os.path.relpath(Path(path).absolute(), self.base)
        rel = rel.replace(os.sep, "/")
        if rel.startswith("./"):
            rel = rel[2:]
        return self.excluded_rel(rel)
