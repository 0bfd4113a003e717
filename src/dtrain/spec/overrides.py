"""`--set path=value` overrides, as `az ml job create --set` applies them, before validation."""
from __future__ import annotations

import re

import yaml

from ..errors import UsageError
from .secrets import looks_secret
from .diagnostics import Collector
from .yamlload import MAX_DEPTH, TooDeep, load_value, type_name

_SEGMENT = re.compile(r"[^.\[\]]+|\[\d+\]")


def parse_path(path: str, flag: str = "--set") -> tuple:
    parts = []
    for seg in _SEGMENT.findall(path):
        parts.append(int(seg[1:-1]) if seg.startswith("[") else seg)
    if not parts or "".join(str(p) for p in parts) == "":
        raise UsageError(f"{flag} '{path}': empty path", hint=f"write {flag} resources.instance_count=2")
    if len(parts) > MAX_DEPTH:
        raise UsageError(f"{flag} path is {len(parts)} levels deep; a job spec nests at most {MAX_DEPTH}",
                         hint=f"write {flag} resources.instance_count=2")
    return tuple(parts)


class BadOverride(UsageError):
    """A --set (or --matrix) value that is not valid YAML."""


# A value opening a flow collection or a quote is meant as YAML: if it does not parse ("[1", "{a: 1",
# "'x"), taking it as a plain string would hand every process a broken argument.
_MEANT_AS_YAML = ("[", "{", '"', "'")


def parse_value(text: str, flag: str = "--set", item: str | None = None):
    """YAML scalars and flow collections: 4 -> int, true -> bool, {a: b} -> mapping, else the string.

    A value that opens a bracket or quote and is not valid YAML is a UsageError naming `flag` (and
    `item`, the whole PATH=VALUE, when given)."""
    try:
        v = load_value(text)
    except yaml.YAMLError as exc:
        if isinstance(exc, TooDeep) or "maximum nesting depth" in str(exc):  # libyaml >= 0.2.6's own limit
            raise UsageError(f"{flag} value nests deeper than {MAX_DEPTH} levels",
                             hint="a job spec needs no deep nesting") from None
        if not text.strip().startswith(_MEANT_AS_YAML):
            return text
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadOverride(f"{flag} '{item or text}': the value is not valid YAML ({problem})",
                          hint="close the bracket or quote; a string that starts with one needs quotes around it, "
                               "e.g. PATH='\"[1\"'")
    return text if v is None and text.strip() not in ("null", "~") else v


def parse_override(item: str, flag: str = "--set") -> tuple[tuple, object]:
    """One PATH=VALUE flag (--set, or one --matrix value) as (path, value); UsageError naming `flag`."""
    if "=" not in item:
        raise UsageError(f"{flag} '{item}' has no '='", hint=f"write {flag} path=value, e.g. {flag} resources.instance_count=2")
    key, _, raw = item.partition("=")
    path = parse_path(key.strip(), flag)
    shown = f"{key.strip()}=***" if any(isinstance(p, str) and looks_secret(p) for p in path) else item
    return path, parse_value(raw, flag, shown)


def apply(data: dict, sets: list[str], locations: dict, diags: Collector | None = None) -> dict:
    """Apply --set flags in order. With diags, an override that changes a literal input's type (an
    integer set to a string) is a warning: the script's argument parser is the next to see it."""
    for item in sets or []:
        try:
            path, value = parse_override(item)
        except BadOverride as exc:
            if diags is None:
                raise
            # Reported with the spec's own problems (the value is left out of the spec).
            where = ("<set>", item)
            diags.locations[where] = _label(item)
            diags.error(where, exc.message, hint=exc.hint, code="bad-override")
            continue
        old = _literal_input(data, path)
        _set(data, path, value, item)
        # A diagnostic about this value names it by this label: a secret's value stays out of it.
        key = item.partition("=")[0].strip()
        label = _label(item)
        locations[path] = label
        for k in [k for k in locations if k[:len(path)] == path and k != path]:
            locations[k] = label
        if diags is not None and old is not _NO_LITERAL and _kind(old) != _kind(value):
            diags.warning(path, f"{key} is {type_name(old)} in the spec; the override makes it "
                          f"{type_name(value)}", hint="check the value; quote it only if a string is meant",
                          code="override-type")
    return data


def _label(item: str) -> str:
    """How a diagnostic names this flag: a secret-looking key's value stays out of it."""
    key = item.partition("=")[0].strip()
    return f"--set {key}=***" if any(isinstance(p, str) and looks_secret(p) for p in parse_path(key)) \
        else f"--set {item}"


_NO_LITERAL = object()


def _literal_input(data: dict, path: tuple):
    """The spec's literal at an inputs.NAME (or inputs.NAME.value) path, else _NO_LITERAL."""
    if len(path) not in (2, 3) or path[0] != "inputs" or (len(path) == 3 and path[2] != "value"):
        return _NO_LITERAL
    inputs = data.get("inputs")
    v = inputs.get(path[1], _NO_LITERAL) if isinstance(inputs, dict) else _NO_LITERAL
    if len(path) == 3 or isinstance(v, dict) and set(v) == {"value"}:
        v = v.get("value", _NO_LITERAL) if isinstance(v, dict) else _NO_LITERAL
    return v if isinstance(v, (str, int, float, bool)) else _NO_LITERAL


def _kind(v) -> str:
    """Integers and decimals are both numbers here: lr=1 for lr: 0.1 is no change of type."""
    if isinstance(v, bool):
        return "boolean"
    return "number" if isinstance(v, (int, float)) else type(v).__name__


def _set(data: dict, path: tuple, value, item: str) -> None:
    """Put value at path, creating mappings on the way, as az ml's --set does."""
    node = _parent(data, path, item)
    last = path[-1]
    if isinstance(node, list):
        if not isinstance(last, int) or last >= len(node):
            raise UsageError(f"--set '{item}': index out of range")
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise UsageError(f"--set '{item}': cannot set inside a {type(node).__name__}")


def _parent(data: dict, path: tuple, item: str):
    """The container that holds path's last part; missing mappings on the way are created."""
    node: dict | list = data
    for i, p in enumerate(path[:-1]):
        nxt = _child(node, p)
        if not isinstance(nxt, (dict, list)):
            if not isinstance(node, dict):
                raise UsageError(f"--set '{item}': {'.'.join(map(str, path[:i + 1]))} is not a mapping")
            nxt = {}
            node[p] = nxt
        node = nxt
    return node


def _child(node, p):
    if isinstance(node, list):
        return node[p] if isinstance(p, int) and p < len(node) else None
    return node.get(p) if isinstance(node, dict) else None
