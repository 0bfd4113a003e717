"""A small validator for Azure ML REST bodies against the resource-manager OpenAPI (mfe.json).

It understands what the job definitions use: ``$ref`` (local and into the common-types files),
``allOf`` inheritance, polymorphism through ``discriminator`` + ``x-ms-discriminator-value``,
``required``, ``type``, ``enum`` (definitions with an ``enum`` list), ``minLength``, ``pattern``,
``x-nullable``, ``additionalProperties`` (``false`` or a schema) and arrays.  Read-only properties
sent by a client are tolerated, as the service ignores them.

The spec files are read from the shared conformance folder at run time; nothing from them is
copied into the project.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

_DEFAULT_CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance"
CONFORMANCE_DIR = Path(os.environ.get("DTRAIN_CONFORMANCE", str(_DEFAULT_CONFORMANCE))).resolve()
REST_SPEC_DIR = CONFORMANCE_DIR / "rest-spec"
MFE_DIR = (
    REST_SPEC_DIR
    / "specification"
    / "machinelearningservices"
    / "resource-manager"
    / "Microsoft.MachineLearningServices"
)
STABLE_MFE = MFE_DIR / "stable" / "2024-04-01" / "mfe.json"
PREVIEW_MFE = MFE_DIR / "preview" / "2024-04-01-preview" / "mfe.json"
EXAMPLES_DIR = REST_SPEC_DIR / "examples-2024-04-01"

Schema = Dict[str, Any]


@lru_cache(maxsize=None)
def _load(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_example(relative: str) -> Dict[str, Any]:
    """An official request/response example, e.g. ``load_example("Job/CommandJob/get.json")``."""
    return _load(str(EXAMPLES_DIR / relative))


class SpecValidator:
    """Validates JSON instances against definitions of one mfe.json."""

    def __init__(self, spec_path: Path = STABLE_MFE) -> None:
        self.spec_path = Path(spec_path)
        self.doc = _load(str(self.spec_path))
        # name of base definition -> list of (file, name) of definitions deriving from it
        self._subtypes: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
        for name, schema in self.doc.get("definitions", {}).items():
            for part in schema.get("allOf", []):
                if "$ref" in part:
                    base = self._ref_key(str(self.spec_path), part["$ref"])
                    self._subtypes.setdefault(base, []).append((str(self.spec_path), name))

    # -- $ref handling -------------------------------------------------------------------------
    def _ref_key(self, current_file: str, ref: str) -> Tuple[str, str]:
        file_part, _, pointer = ref.partition("#")
        target = current_file
        if file_part:
            target = str((Path(current_file).parent / file_part).resolve())
        name = pointer.rsplit("/", 1)[-1]
        return target, name

    def _definition(self, key: Tuple[str, str]) -> Schema:
        return _load(key[0])["definitions"][key[1]]

    def definition(self, name: str) -> Schema:
        return self.doc["definitions"][name]

    # -- flattening of allOf -----------------------------------------------------------------
    def _flatten(self, key: Tuple[str, str]) -> Tuple[Dict[str, Tuple[str, Schema]], set, Any, Optional[str]]:
        """Properties (name -> (file, schema)), required names, additionalProperties and
        discriminator property collected over the allOf chain of a definition."""
        schema = self._definition(key)
        props: Dict[str, Tuple[str, Schema]] = {}
        required: set = set()
        discriminator: Optional[str] = None
        for part in schema.get("allOf", []):
            if "$ref" in part:
                bprops, breq, _, bdisc = self._flatten(self._ref_key(key[0], part["$ref"]))
                props.update(bprops)
                required |= breq
                discriminator = discriminator or bdisc
            else:
                for pname, pschema in part.get("properties", {}).items():
                    props[pname] = (key[0], pschema)
                required |= set(part.get("required", []))
        for pname, pschema in schema.get("properties", {}).items():
            props[pname] = (key[0], pschema)
        required |= set(schema.get("required", []))
        discriminator = schema.get("discriminator", discriminator)
        return props, required, schema.get("additionalProperties"), discriminator

    def _concrete(self, key: Tuple[str, str], instance: Dict[str, Any], path: str, errors: List[str]) -> Tuple[str, str]:
        """Pick the subtype named by the discriminator value (if the definition is polymorphic)."""
        schema = self._definition(key)
        disc = schema.get("discriminator")
        if not disc:
            return key
        value = instance.get(disc)
        if value is None:
            return key  # 'required' reports it
        found = self._find_subtype(key, value)
        if found is None:
            allowed = sorted(self._discriminator_values(key))
            errors.append(f"{path}.{disc}: unknown value {value!r} (allowed: {', '.join(allowed)})")
            return key
        return found

    def _find_subtype(self, key: Tuple[str, str], value: str) -> Optional[Tuple[str, str]]:
        schema = self._definition(key)
        if schema.get("x-ms-discriminator-value", key[1]) == value and "discriminator" not in schema:
            return key
        for sub in self._subtypes.get(key, []):
            sub_schema = self._definition(sub)
            if sub_schema.get("x-ms-discriminator-value", sub[1]) == value:
                return sub
            deeper = self._find_subtype(sub, value)
            if deeper is not None:
                return deeper
        return None

    def _discriminator_values(self, key: Tuple[str, str]) -> set:
        values = set()
        for sub in self._subtypes.get(key, []):
            values.add(self._definition(sub).get("x-ms-discriminator-value", sub[1]))
            values |= self._discriminator_values(sub)
        return values

    # -- validation ----------------------------------------------------------------------------
    def validate(self, instance: Any, definition: str, path: str = "$") -> List[str]:
        """Errors (empty when valid) of ``instance`` against ``#/definitions/<definition>``."""
        errors: List[str] = []
        self._validate_ref(instance, (str(self.spec_path), definition), path, errors, nullable=False)
        return errors

    def _validate_ref(self, instance: Any, key: Tuple[str, str], path: str, errors: List[str], nullable: bool) -> None:
        schema = self._definition(key)
        if instance is None:
            if not (nullable or schema.get("x-nullable")):
                errors.append(f"{path}: null is not allowed")
            return
        is_object_definition = "enum" not in schema and (
            schema.get("type") == "object" or "properties" in schema or "allOf" in schema or "discriminator" in schema
        )
        if not is_object_definition:
            self._validate_schema(instance, key[0], schema, path, errors)
            return
        if not isinstance(instance, dict):
            errors.append(f"{path}: expected an object, got {type(instance).__name__}")
            return
        concrete = self._concrete(key, instance, path, errors)
        self._validate_object(instance, concrete, path, errors)

    def _validate_object(self, instance: Dict[str, Any], key: Tuple[str, str], path: str, errors: List[str]) -> None:
        props, required, additional, _ = self._flatten(key)
        for name in sorted(required):
            if name not in instance or instance[name] is None:
                errors.append(f"{path}.{name}: required property is missing")
        for name, value in instance.items():
            if name in props:
                file_, pschema = props[name]
                if value is None and name not in required:
                    if not pschema.get("x-nullable") and not self._ref_nullable(file_, pschema):
                        errors.append(f"{path}.{name}: null is not allowed")
                    continue
                self._validate_schema(value, file_, pschema, f"{path}.{name}", errors)
            elif additional is False:
                errors.append(f"{path}.{name}: unknown property (not in {key[1]})")
            elif isinstance(additional, dict):
                self._validate_schema(value, key[0], additional, f"{path}.{name}", errors)

    def _ref_nullable(self, file_: str, schema: Schema) -> bool:
        if "$ref" in schema:
            return bool(self._definition(self._ref_key(file_, schema["$ref"])).get("x-nullable"))
        return False

    def _validate_schema(self, instance: Any, file_: str, schema: Schema, path: str, errors: List[str]) -> None:
        if "$ref" in schema:
            self._validate_ref(
                instance, self._ref_key(file_, schema["$ref"]), path, errors, nullable=bool(schema.get("x-nullable"))
            )
            return
        if instance is None:
            if not schema.get("x-nullable"):
                errors.append(f"{path}: null is not allowed")
            return
        stype = schema.get("type")
        if "allOf" in schema or "properties" in schema:
            stype = stype or "object"
        checks = {
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "array": lambda v: isinstance(v, list),
            "object": lambda v: isinstance(v, dict),
        }
        if stype in checks and not checks[stype](instance):
            errors.append(f"{path}: expected {stype}, got {type(instance).__name__}")
            return
        if "enum" in schema and instance not in schema["enum"]:
            errors.append(f"{path}: {instance!r} is not one of {schema['enum']}")
        if stype == "string":
            if len(instance) < schema.get("minLength", 0):
                errors.append(f"{path}: shorter than minLength {schema['minLength']}")
            if "pattern" in schema and not re.search(schema["pattern"], instance):
                errors.append(f"{path}: {instance!r} does not match pattern {schema['pattern']!r}")
        elif stype == "integer" and schema.get("format") == "int32" and not -(2**31) <= instance < 2**31:
            errors.append(f"{path}: {instance} is out of int32 range")
        elif stype == "array" and "items" in schema:
            for i, item in enumerate(instance):
                self._validate_schema(item, file_, schema["items"], f"{path}[{i}]", errors)
        elif stype == "object":
            inline_props = schema.get("properties", {})
            for name in schema.get("required", []):
                if name not in instance:
                    errors.append(f"{path}.{name}: required property is missing")
            additional = schema.get("additionalProperties")
            for name, value in instance.items():
                if name in inline_props:
                    self._validate_schema(value, file_, inline_props[name], f"{path}.{name}", errors)
                elif isinstance(additional, dict):
                    self._validate_schema(value, file_, additional, f"{path}[{name!r}]", errors)
                elif additional is False:
                    errors.append(f"{path}.{name}: unknown property")


def validate_job_body(body: Any, validator: Optional[SpecValidator] = None) -> List[str]:
    """Errors of a job PUT body (``{"properties": {...}}``) against the spec.

    The ``properties`` object is validated against ``JobBase`` (dispatching on ``jobType`` to e.g.
    ``CommandJob``); unknown properties at the top level of ``properties`` are always rejected.
    """
    validator = validator or default_validator()
    errors: List[str] = []
    if not isinstance(body, dict):
        return ["$: the body must be a JSON object"]
    for name in body:
        if name not in ("properties", "id", "name", "type", "systemData"):
            errors.append(f"$.{name}: unknown property (not in JobBaseResource)")
    props = body.get("properties")
    if not isinstance(props, dict):
        errors.append("$.properties: required object is missing")
        return errors
    errors.extend(validator.validate(props, "JobBase", "$.properties"))
    # the flattened JobBase subtype is closed at its top level even where the spec omits
    # additionalProperties=false on the derived definition
    key = (str(validator.spec_path), "JobBase")
    concrete = validator._concrete(key, props, "$.properties", [])
    if concrete == key:
        return errors  # unknown or missing jobType, already reported
    known, _, _, _ = validator._flatten(concrete)
    for name in props:
        if name not in known:
            msg = f"$.properties.{name}: unknown property (not in {concrete[1]})"
            if msg not in errors:
                errors.append(msg)
    return errors


@lru_cache(maxsize=None)
def default_validator() -> SpecValidator:
    return SpecValidator(STABLE_MFE)
