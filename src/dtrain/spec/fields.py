"""A small declarative schema language: each field checks a value (adding diagnostics) and exports
JSON Schema. The job schema in schema.py is written in it, so validation, `dtrain schema` and the
docs' field reference come from one table."""
from __future__ import annotations

import difflib
import re

from .diagnostics import Collector
from .secrets import looks_secret
from .yamlload import type_name


def camel_to_snake(text: str) -> str:
    """azure-ai-ml's camel_to_snake, the case transform its identity enums match with:
    AMLToken, amlToken and AML_TOKEN all become aml_token (Aml_Token becomes aml__token, refused)."""
    text = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", text)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", text).lower()


def anchored(pattern: str) -> str:
    """A Python fullmatch pattern as a JSON Schema pattern (which searches unless anchored)."""
    return f"^(?:{pattern})$"


def case_pattern(value: str, casing) -> str:
    """A JSON Schema pattern for the spellings an enum value has under the SDK's case transform.

    JSON Schema has no case-insensitive flag: each letter becomes [xX]. Under camel_to_snake an
    underscore may also be absent (AMLToken); the pattern then admits a few spellings (amltoken) that
    `validate` refuses, which is as near as a regular expression gets to the transform."""
    out = ""
    for ch in value:
        if ch.isalpha():
            out += f"[{ch.lower()}{ch.upper()}]"
        elif ch == "_" and casing is camel_to_snake:
            out += "_?"
        else:
            out += re.escape(ch)
    return f"^{out}$"


def _enum_json(values, casing) -> dict:
    if casing is None:
        return {"enum": list(values)}
    # the enum keeps editor completion; the patterns accept every case the SDK accepts
    return {"anyOf": [{"enum": list(values)}, *({"pattern": case_pattern(v, casing)} for v in values)]}


def did_you_mean(word: str, choices) -> str | None:
    m = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return m[0] if m else None


class Field:
    doc: str = ""

    def check(self, v, path: tuple, c: Collector) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def json(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def _j(self, d: dict) -> dict:
        if self.doc:
            d["description"] = self.doc
        return d

    def describe(self) -> str:
        return type(self).__name__.lower()


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _whole_number(v):
    """2.0 or "2" -> 2 (what a non-strict integer field accepts); None for anything else."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("+-").isdigit():
        return int(v.strip())
    return None


class Str(Field):
    def __init__(self, doc="", *, enum=None, ci=False, pattern=None, pattern_hint=None, max_len=None,
                 allow_null=False, number_hint=None, casing=None):
        self.doc, self.enum, self.ci, self.max_len, self.allow_null = doc, enum, ci, max_len, allow_null
        # How the SDK folds an enum value before matching: str.lower (ci=True) or camel_to_snake.
        self.casing = casing or (str.lower if ci else None)
        self.number_hint = number_hint  # v -> hint for an unquoted number, when quoting alone is not the fix
        self.pattern = re.compile(pattern) if pattern else None
        self.pattern_hint = pattern_hint

    def check(self, v, path, c):
        if v is None and self.allow_null:
            return
        if not isinstance(v, str):
            what = "one of " + ", ".join(self.enum) if self.enum else "a string"
            c.error(path, f"expected {what}, got {type_name(v)} ({v!r})", hint=self._non_string_hint(v), code="type")
            return
        if self.enum is not None and not self._check_enum(v, path, c):
            return
        if self.max_len and len(v) > self.max_len:
            c.error(path, f"is {len(v)} characters long; at most {self.max_len} allowed", code="range")
        if self.pattern and not self.pattern.fullmatch(v):
            self._pattern_error(v, path, c)

    def _non_string_hint(self, v) -> str | None:
        """For a number or boolean where a string belongs: quoting, unless the quoted value is still wrong."""
        if not isinstance(v, (int, float, bool)):
            return None
        quoted_ok = self.pattern is None or (not isinstance(v, bool) and self.pattern.fullmatch(str(v)))
        if quoted_ok:
            return "quote the value"
        if self.number_hint and not isinstance(v, bool):
            return self.number_hint(v)
        return self.pattern_hint

    def _check_enum(self, v: str, path, c) -> bool:
        cand = self.casing(v) if self.casing else v
        allowed = [self.casing(e) for e in self.enum] if self.casing else list(self.enum)
        if cand in allowed:
            return True
        dym = did_you_mean(v, self.enum)
        c.error(path, f"'{v}' is not one of: {', '.join(self.enum)}",
                hint=f"did you mean '{dym}'?" if dym else None, code="enum")
        return False

    def _pattern_error(self, v: str, path, c) -> None:
        what = str(path[-1]).replace("_", " ") if path and isinstance(path[-1], str) else "value"
        hint = self.pattern_hint
        if self.number_hint and v.strip().isdigit():  # "16": the number without its unit
            hint = self.number_hint(int(v))
        c.error(path, f"{what} '{v}' is not valid", hint=hint, code="format")

    def json(self):
        d: dict = {"type": ["string", "null"] if self.allow_null else "string"}
        if self.enum:
            d.update(_enum_json(self.enum, self.casing))
        if self.pattern:
            d["pattern"] = anchored(self.pattern.pattern)
        return self._j(d)

    def describe(self):
        return "one of " + " | ".join(self.enum) if self.enum else "string"


class Int(Field):
    def __init__(self, doc="", *, min=None, max=None, max_hint=None):
        self.doc, self.min, self.max, self.max_hint = doc, min, max, max_hint

    def check(self, v, path, c):
        whole = _whole_number(v)
        if whole is not None:
            # Azure's SDK reads "2" and 2.0 as 2; accept them as it does, but say so.
            c.warning(path, f"{v!r} read as the integer {whole}", hint=f"write {whole} without quotes or decimals",
                      code="coerced")
            c.coercions.append((path, whole))
            v = whole
        if not _is_int(v):
            hint = "write a whole number without quotes" if isinstance(v, (str, float)) else None
            if isinstance(v, bool):
                hint = "true/false is a boolean; write a number"
            c.error(path, f"expected an integer, got {type_name(v)} ({v!r})", hint=hint, code="type")
            return
        if self.min is not None and v < self.min:
            c.error(path, f"must be at least {self.min}, got {v}", code="range")
        if self.max is not None and v > self.max:
            c.error(path, f"must be at most {self.max}, got {v}", hint=self.max_hint, code="range")

    def json(self):
        d = {"type": "integer"}
        if self.min is not None:
            d["minimum"] = self.min
        if self.max is not None:
            d["maximum"] = self.max
        # "2" is accepted too (with a warning), as the SDK accepts it
        return self._j({"anyOf": [d, {"type": "string", "pattern": r"^\s*[+-]?[0-9]+\s*$"}]})

    def describe(self):
        r = "integer"
        if self.min is not None:
            r += f" >= {self.min}"
        return r


class Bool(Field):
    def __init__(self, doc=""):
        self.doc = doc

    def check(self, v, path, c):
        if not isinstance(v, bool):
            c.error(path, f"expected true or false, got {type_name(v)} ({v!r})", code="type")

    def json(self):
        return self._j({"type": "boolean"})

    def describe(self):
        return "boolean"


class Scalar(Field):
    """A string, number or boolean (literal input values, tag values)."""

    def __init__(self, doc="", *, allow_null=False):
        self.doc, self.allow_null = doc, allow_null

    def check(self, v, path, c):
        if v is None and self.allow_null:
            return
        if not isinstance(v, (str, int, float, bool)):
            c.error(path, f"expected a string, number or boolean, got {type_name(v)}", code="type")

    def json(self):
        types = ["string", "number", "integer", "boolean"] + (["null"] if self.allow_null else [])
        return self._j({"type": types})

    def describe(self):
        return "string | number | boolean"


class EnvValue(Field):
    """An environment variable's value. The REST body holds strings (or null); azure-ai-ml sends a
    number or boolean as written and the service refuses the job (400), so it is refused here."""

    doc = ""

    def check(self, v, path, c):
        if v is None or isinstance(v, str):
            return
        key = str(path[-1]) if path else "value"
        secret = looks_secret(key)
        quoted = f'quote it: {key}: "{_yaml_text(v)}"' if isinstance(v, (int, float, bool)) and not secret \
            else "write a string; quote numbers and booleans"
        # The value is not echoed: a secret-looking key's value must not reach a terminal or CI log.
        c.add("error", path, f"environment variable '{key}' must be a string, got {type_name(v)}",
              hint=quoted + " (Azure ML refuses other values)", code="type", redact=secret)

    def json(self):
        return self._j({"type": ["string", "null"]})

    def describe(self):
        return "string"


def _yaml_text(v) -> str:
    """A scalar as YAML wrote it: true, not True."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


class AnyValue(Field):
    def __init__(self, doc=""):
        self.doc = doc

    def check(self, v, path, c):
        pass

    def json(self):
        return self._j({})

    def describe(self):
        return "any"


class Map(Field):
    """A mapping with known keys. Unknown keys are errors with did-you-mean and, for keys Azure renamed,
    the name of today's key."""

    def __init__(self, fields: dict, doc="", *, required=(), renamed=None, open=False):
        self.fields, self.doc, self.required = fields, doc, tuple(required)
        self.renamed = renamed or {}   # old key -> message naming today's key
        self.open = open

    def check(self, v, path, c):
        if not isinstance(v, dict):
            c.error(path, f"expected a mapping with keys {', '.join(self.fields)}, got {type_name(v)}",
                    code="type")
            return
        for k, val in v.items():
            f = self.fields.get(k)
            if f is None:
                if self.open:
                    continue
                self.unknown(k, path + (k,), c)
                continue
            f.check(val, path + (k,), c)
        for r in self.required:
            if r not in v:
                c.error(path, f"missing required key '{r}'" + (f" in {path[-1]}" if path else ""),
                        hint=f"add `{r}:` ({self.fields[r].describe()})", code="required")

    def unknown(self, k, path, c):
        if k in self.renamed:
            c.error(path, f"'{k}' is not a key here: {self.renamed[k]}", code="renamed-key")
            return
        dym = did_you_mean(k, self.fields)
        known = ", ".join(self.fields)
        c.error(path, f"unknown key '{k}'", code="unknown-key",
                hint=f"did you mean '{dym}'?" if dym else f"valid keys here: {known}")

    def json(self):
        d: dict = {"type": "object", "properties": {k: f.json() for k, f in self.fields.items()}}
        if self.required:
            d["required"] = list(self.required)
        if not self.open:
            d["additionalProperties"] = False
        return self._j(d)

    def describe(self):
        return "mapping"


class DictField(Field):
    """A mapping of free keys to values of one field type."""

    def __init__(self, values: Field, doc="", *, key_pattern=None, key_hint=None):
        self.values, self.doc = values, doc
        self.key_pattern = re.compile(key_pattern) if key_pattern else None
        self.key_hint = key_hint

    def check(self, v, path, c):
        if not isinstance(v, dict):
            c.error(path, f"expected a mapping, got {type_name(v)}", code="type")
            return
        for k, val in v.items():
            if self.key_pattern and not (isinstance(k, str) and self.key_pattern.fullmatch(k)):
                c.error(path + (k,), f"'{k}' is not a valid name here", hint=self.key_hint, code="format")
            self.values.check(val, path + (k,), c)

    def json(self):
        d = {"type": "object", "additionalProperties": self.values.json()}
        if self.key_pattern:
            d["propertyNames"] = {"pattern": anchored(self.key_pattern.pattern)}
        return self._j(d)

    def describe(self):
        return "mapping"


class ListField(Field):
    def __init__(self, items: Field, doc=""):
        self.items, self.doc = items, doc

    def check(self, v, path, c):
        if not isinstance(v, list):
            c.error(path, f"expected a list, got {type_name(v)}", code="type")
            return
        for i, item in enumerate(v):
            self.items.check(item, path + (i,), c)

    def json(self):
        return self._j({"type": "array", "items": self.items.json()})

    def describe(self):
        return "list"


class UnionField(Field):
    """One of several shapes, picked by the Python type of the value (str vs mapping vs list)."""

    def __init__(self, *alts: Field, doc=""):
        self.alts, self.doc = alts, doc

    def _pick(self, v):
        for a in self.alts:
            if isinstance(a, (Map, DictField, Tagged)) and isinstance(v, dict):
                return a
            if isinstance(a, ListField) and isinstance(v, list):
                return a
            if isinstance(a, Str) and isinstance(v, str):
                return a
            if isinstance(a, Int) and _is_int(v):
                return a
            if isinstance(a, Scalar) and isinstance(v, (str, int, float, bool)):
                return a
        return None

    def check(self, v, path, c):
        a = self._pick(v)
        if a is None:
            c.error(path, f"expected {' or '.join(x.describe() for x in self.alts)}, got {type_name(v)}",
                    code="type")
            return
        a.check(v, path, c)

    def json(self):
        return self._j({"anyOf": [a.json() for a in self.alts]})

    def describe(self):
        return " or ".join(a.describe() for a in self.alts)


class Tagged(Field):
    """A mapping whose `type` key picks its shape (distribution, identity, services, inputs)."""

    def __init__(self, variants: dict, doc="", *, key="type", default=None, ci=True, fallback=None, casing=None):
        self.variants, self.doc, self.key, self.default, self.ci = variants, doc, key, default, ci
        self.fallback = fallback  # Map for types not in variants (e.g. custom services)
        self.casing = casing or (str.lower if ci else None)

    def variant_name(self, v) -> str | None:
        t = v.get(self.key, self.default)
        if not isinstance(t, str):
            return None
        for name in self.variants:
            if (self.casing(name) == self.casing(t)) if self.casing else name == t:
                return name
        return None

    def check(self, v, path, c):
        if not isinstance(v, dict):
            c.error(path, f"expected a mapping with `{self.key}: {' | '.join(self.variants)}`, got {type_name(v)}",
                    code="type")
            return
        t = v.get(self.key, self.default)
        if t is None:
            c.error(path, f"missing '{self.key}' (one of {', '.join(self.variants)})",
                    hint=f"add `{self.key}: {next(iter(self.variants))}`", code="required")
            return
        name = self.variant_name(v)
        if name is None:
            if self.fallback is not None and isinstance(t, str):
                self.fallback.check(v, path, c)
                return
            dym = did_you_mean(str(t), self.variants)
            c.error(path + (self.key,), f"'{t}' is not one of: {', '.join(self.variants)}",
                    hint=f"did you mean '{dym}'?" if dym else None, code="enum")
            return
        self.variants[name].check(v, path, c)

    def json(self):
        # anyOf, not oneOf: a mapping without `type` (the default variant) matches several variants.
        alts = []
        for name, m in self.variants.items():
            j = m.json()
            j.setdefault("properties", {})[self.key] = {"type": "string", **_enum_json([name], self.casing)}
            if self.default is None:
                j["required"] = sorted(set(j.get("required", [])) | {self.key})
            alts.append(j)
        if self.fallback is not None:
            alts.append(self.fallback.json())
        return self._j({"type": "object", "anyOf": alts})

    def describe(self):
        return f"mapping with {self.key}: " + " | ".join(self.variants)
