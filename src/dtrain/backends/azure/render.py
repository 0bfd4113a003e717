"""Render a validated spec: as YAML for `az ml job create --file`, or as the REST job body."""
from __future__ import annotations

import copy

import yaml

from ...spec.model import JobSpec
from .rest import job_body


def rest_document(spec: JobSpec, name: str | None = None) -> dict:
    """The whole body of PUT .../jobs/{name}, `{"properties": {...}}`, as azure-ai-ml's
    `_to_rest_object()` serialises it (the name goes in the URL, not the body)."""
    return {"properties": job_body(spec)}


def to_yaml(spec: JobSpec, name: str | None = None) -> str:
    data = copy.deepcopy(spec.data)
    if name:
        data = {"name": name, **{k: v for k, v in data.items() if k != "name"}}
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    header = ""
    if spec.source is not None:
        header = f"# rendered by dtrain from {spec.source}; relative paths are relative to {spec.base_dir}\n"
    return header + text.rstrip("\n")
