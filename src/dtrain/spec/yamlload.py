"""Load a YAML job spec into plain Python values plus a map of where every value came from.

Guards against what a hostile or broken file can do to a loader: binary content, huge files, deep
nesting and alias bombs ("billion laughs") are refused with a diagnostic, never a traceback or a hang.
Duplicate keys are reported (PyYAML silently keeps the last one; Azure would too).
"""
from __future__ import annotations

import yaml
import yaml.composer
import yaml.resolver
from yaml.reader import Reader
from yaml.scanner import Scanner

from .diagnostics import Collector

MAX_BYTES = 2 * 1024 * 1024     # a job spec is a few KiB; megabytes means the wrong file
MAX_DEPTH = 40                   # Azure's deepest structures nest ~6 levels
MAX_NODES = 200_000              # values built, aliases expanded; bounds alias bombs

try:  # libyaml's parser is 5-10x faster where present (and, unlike its composer, not recursive)
    from yaml._yaml import CParser
    _PARSER_BASES: tuple = (CParser,)
except ImportError:  # pragma: no cover - PyYAML without libyaml
    from yaml.parser import Parser
    _PARSER_BASES = (Reader, Scanner, Parser)


# libyaml's composer recurses in C once per level and crashes past ~25,000 levels; under this bound on
# the depth a text can reach it is safe (and 2x faster than composing in Python).
_C_COMPOSER_SAFE_DEPTH = 2000


def _depth_bound(text: str) -> int:
    """An upper bound on the nesting depth of a YAML text, in microseconds: every level opens with a
    flow bracket, a block-sequence dash, a complex-key '?' or a new, more indented line."""
    return (text.count("[") + text.count("{") + text.count("-") + text.count("?") + text.count("\n")
            + text.count("\r") + 1)


class TooDeep(yaml.YAMLError):
    def __init__(self, mark):
        super().__init__(f"the YAML nests deeper than {MAX_DEPTH} levels")
        self.mark = mark


# mypy cannot follow bases chosen at import (libyaml's CParser where present, else PyYAML's Python parser)
class _GuardedLoader(*_PARSER_BASES, yaml.composer.Composer, yaml.resolver.Resolver):  # type: ignore[misc]
    """Parser events composed into nodes by PyYAML's Python composer, with a depth guard.

    libyaml's own composer recurses once per level in C: 30,000 nested `[` overflow the stack and kill
    the process before any check on the built value can run. Composing here stops at MAX_DEPTH + 1."""

    def __init__(self, text):
        if len(_PARSER_BASES) == 1:
            CParser.__init__(self, text)
        else:  # pragma: no cover - PyYAML without libyaml
            Reader.__init__(self, text)
            Scanner.__init__(self)
            Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0

    get_single_node = yaml.composer.Composer.get_single_node
    compose_document = yaml.composer.Composer.compose_document

    def compose_node(self, parent, index):
        if self._depth > MAX_DEPTH:
            raise TooDeep(self.peek_event().start_mark)
        self._depth += 1
        try:
            return yaml.composer.Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Budget(Exception):
    pass


class Loaded:
    def __init__(self, data, locations):
        self.data = data
        self.locations = locations  # path tuple -> (line, column), 1-based


_COMPLEX_HINT = "a job spec needs no deep nesting or repeated aliases"
_EMPTY_HINT = "start from `dtrain init DIR --template pytorch-ddp`"


def load_text(text_or_bytes, diags: Collector):
    """Parse spec text. Returns Loaded or None (with diagnostics added) when it cannot be used."""
    raw = _decode(text_or_bytes, diags) if isinstance(text_or_bytes, bytes) else text_or_bytes
    if raw is None:
        return None
    if not raw.strip() or all(l.strip().startswith("#") or not l.strip() for l in raw.splitlines()):
        diags.error((), "file is empty", hint=_EMPTY_HINT, code="empty")
        return None
    node = _compose(raw, diags)
    if node is None:
        return None
    return _build(node, diags)


def _decode(raw: bytes, diags: Collector) -> str | None:
    """The file's text, or None (with a diagnostic) for a huge, binary or non-UTF-8 file."""
    if len(raw) > MAX_BYTES:
        diags.error((), f"file is {len(raw) // 1024} KiB; a job spec is a small YAML file",
                    hint="check that the path names a job YAML", code="too-large")
        return None
    if b"\x00" in raw[:8192]:
        diags.error((), "file is binary, not YAML", hint="check that the path names a job YAML", code="binary")
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        diags.error((), f"file is not UTF-8 text (byte {exc.start})", hint="save the spec as UTF-8", code="binary")
        return None


def _compose(raw: str, diags: Collector):
    """The document's root node, or None (with a diagnostic) when it does not parse or is empty."""
    try:
        fast = len(_PARSER_BASES) == 1 and _depth_bound(raw) < _C_COMPOSER_SAFE_DEPTH
        loader = yaml.CSafeLoader(raw) if fast else _GuardedLoader(raw)
        try:
            node = loader.get_single_node()
        finally:
            if hasattr(loader, "dispose"):
                loader.dispose()
    except TooDeep as exc:
        diags.locations[()] = (exc.mark.line + 1, exc.mark.column + 1)
        diags.error((), str(exc), hint=_COMPLEX_HINT, code="too-complex")
        return None
    except yaml.MarkedYAMLError as exc:
        _syntax_error(exc, diags)
        return None
    except yaml.YAMLError as exc:
        diags.error((), f"invalid YAML: {exc}", code="yaml-syntax")
        return None
    if node is None:
        diags.error((), "file is empty", hint=_EMPTY_HINT, code="empty")
    return node


def _syntax_error(exc: yaml.MarkedYAMLError, diags: Collector) -> None:
    mark = exc.problem_mark or exc.context_mark
    if mark:
        diags.locations[()] = (mark.line + 1, mark.column + 1)
    if "maximum nesting depth" in str(exc.problem):
        # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) stops at 1,000 flow levels itself, before our guard
        diags.error((), f"the YAML nests deeper than {MAX_DEPTH} levels", hint=_COMPLEX_HINT, code="too-complex")
        return
    diags.error((), f"invalid YAML: {exc.problem or exc}" + (f" ({exc.context})" if exc.context else ""),
                hint="fix the YAML syntax at this line (indentation, a missing ':' or quote)", code="yaml-syntax")


def _build(node, diags: Collector):
    """Plain values and their locations from the root node; None (with a diagnostic) past the budget
    or when the root is not a mapping."""
    builder = _Builder(diags)
    try:
        data = builder.build(node, (), 0)
    except _Budget as exc:
        diags.locations.setdefault((), (node.start_mark.line + 1, node.start_mark.column + 1))
        diags.error((), str(exc), hint=_COMPLEX_HINT, code="too-complex")
        return None
    if not isinstance(data, dict):
        diags.locations[()] = (node.start_mark.line + 1, node.start_mark.column + 1)
        diags.error((), f"a job spec must be a mapping of keys to values, not {type_name(data)}",
                    hint="start with `$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json`",
                    code="not-mapping")
        return None
    return Loaded(data, builder.locations)


def load_value(text: str):
    """One YAML value (a --set value), parsed with the same depth guard as a spec. Raises yaml.YAMLError."""
    loader = _GuardedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return yaml.SafeLoader("").construct_document(node)
    finally:
        if hasattr(loader, "dispose"):
            loader.dispose()


def type_name(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    return type(v).__name__


class _Builder:
    def __init__(self, diags: Collector):
        self.diags = diags
        self.locations: dict = {}
        self.nodes = 0
        self._scalar = yaml.SafeLoader("")  # used only to resolve scalar tags exactly as safe_load does

    def build(self, node, path, depth):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Budget(f"the YAML expands to more than {MAX_NODES} values (an alias bomb?)")
        if depth > MAX_DEPTH:
            raise _Budget(f"the YAML nests deeper than {MAX_DEPTH} levels")
        self.locations.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar.construct_object(node, deep=True)

    def _mapping(self, node, path, depth):
        out: dict = {}
        seen: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged = self.build(value_node, path, depth + 1)
                for m in merged if isinstance(merged, list) else [merged]:
                    if isinstance(m, dict):
                        for k, v in m.items():
                            out.setdefault(k, v)
                continue
            key = self.build(key_node, path + ("<key>",), depth + 1)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                key = str(key)
            kpath = path + (key,)
            line = key_node.start_mark.line + 1
            value = self.build(value_node, kpath, depth + 1)
            if key in seen:
                self._duplicate(kpath, key, key_node, seen[key], out[key], value)
            seen[key] = line
            self.locations[kpath] = (line, key_node.start_mark.column + 1)
            out[key] = value
        return out

    def _duplicate(self, kpath, key, key_node, first_line, first, again) -> None:
        """PyYAML and azure-ai-ml keep the last value silently. The same value twice is harmless
        (a warning: real Azure ML examples do it); two different values mean one edit is lost."""
        where = kpath + ("<dup>",)
        line = key_node.start_mark.line + 1
        self.diags.locations[where] = (line, key_node.start_mark.column + 1)
        if first == again:
            self.diags.warning(where, f"duplicate key '{key}' (first at line {first_line}, same value)",
                               hint="delete one of them", code="duplicate-key")
            return
        self.diags.error(where, f"duplicate key '{key}' with different values: line {first_line} says "
                         f"{_brief(kpath, first)}, line {line} says {_brief(kpath, again)}",
                         hint="YAML keeps only the last one; delete the one you do not mean",
                         code="duplicate-key")


def _brief(path, value) -> str:
    """A short, secret-free rendering of a value for a message."""
    from .secrets import looks_secret

    if any(isinstance(p, str) and looks_secret(p) for p in path):
        return "a value (not shown: the key looks like a secret)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
