"""`--set path=value` overrides, as `az ml job create --set` applies them, before validation."""
from __future__ import annotations

import re

import yaml

from ..errors import UsageError
from .secrets import looks_secret
from .yamlload import MAX_DEPTH, TooDeep, load_value

_SEGMENT = re.compile(r"[^.\[\]]+|\[\d+\]")


def parse_path(path: str) -> tuple:
    parts = []
    for seg in _SEGMENT.findall(path):
        parts.append(int(seg[1:-1]) if seg.startswith("[") else seg)
    if not parts or "".join(str(p) for p in parts) == "":
        raise UsageError(f"--set '{path}': empty path", hint="write --set resources.instance_count=2")
    if len(parts) > MAX_DEPTH:
        raise UsageError(f"--set path is {len(parts)} levels deep; a job spec nests at most {MAX_DEPTH}",
                         hint="write --set resources.instance_count=2")
    return tuple(parts)


def parse_value(text: str):
    """YAML scalars and flow collections: 4 -> int, true -> bool, {a: b} -> mapping, else the string."""
    try:
        v = load_value(text)
    except yaml.YAMLError as exc:
        if not isinstance(exc, TooDeep) and "maximum nesting depth" not in str(exc):  # libyaml >= 0.2.6's own limit
            return text
        raise UsageError(f"--set value nests deeper than {MAX_DEPTH} levels",
                         hint="a job spec needs no deep nesting") from None
    return text if v is None and text.strip() not in ("null", "~") else v


def apply(data: dict, sets: list[str], locations: dict) -> dict:
    for item in sets or []:
        if "=" not in item:
            raise UsageError(f"--set '{item}' has no '='", hint="write --set path=value, e.g. --set resources.instance_count=2")
        key, _, raw = item.partition("=")
        path = parse_path(key.strip())
        _set(data, path, parse_value(raw), item)
        # A diagnostic about this value names it by this label: a secret's value stays out of it.
        label = f"--set {key.strip()}=***" if any(isinstance(p, str) and looks_secret(p) for p in path) \
            else f"--set {item}"
        locations[path] = label
        for k in [k for k in locations if k[:len(path)] == path and k != path]:
            locations[k] = label
    return data


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
