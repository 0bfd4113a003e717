"""Where a job's environment is written: inline in the spec, in an environment YAML (`file:`), a registered
or registry asset (`azureml:NAME:VERSION`, `@latest`, `azureml://registries/...`); and within it, the conda
file (a path or inline), the image, the build context. Every value comes with the file and location map
its diagnostics point into."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.diagnostics import Collector
from ..spec.model import JobSpec, is_remote_ref
from ..spec.yamlload import load_text


@dataclass
class Doc:
    """A mapping read from a YAML file, with where its values are (`prefix`: its path in that file)."""

    data: object
    file: str | None
    locations: dict = field(default_factory=dict)
    prefix: tuple = ()

    def collector(self) -> Collector:
        return Collector(file=self.file, locations=self.locations)

    def at(self, *path) -> tuple:
        return self.prefix + tuple(path)


@dataclass
class EnvSource:
    kind: str                      # "inline" | "registered" | "registry"
    label: str                     # as a sentence names it
    where: Doc                     # the environment (the spec's `environment`, or the environment YAML)
    conda: Doc | None = None       # the conda file, when there is one (and it could be read)
    conda_dir: Path | None = None  # the folder relative paths in it are read against
    image: str | None = None
    build: str | None = None       # the build context, as written
    ref: str | None = None         # the asset reference (registered, registry)


def environment_source(spec: JobSpec, c: Collector) -> EnvSource | None:
    """The spec's environment; problems reading its files go to `c` (None when none can be read)."""
    env = spec.environment
    spec_doc = Doc(spec.data, str(spec.source) if spec.source else None, spec.locations)
    if isinstance(env, str) and env.startswith("file:"):
        path = spec.environment_file()
        doc = _read_yaml(path, c, spec_doc, ("environment",)) if path else None
        if doc is None or not isinstance(doc.data, dict):
            return None
        return _inline(doc.data, doc, path.parent if path else spec.base_dir, c, spec.environment_label)
    if isinstance(env, str):
        kind = "registry" if env.lower().startswith("azureml://registries/") else "registered"
        return EnvSource(kind, spec.environment_label, Doc(spec.data, spec_doc.file, spec.locations, ("environment",)),
                         ref=env)
    if isinstance(env, dict):
        where = Doc(env, spec_doc.file, spec.locations, ("environment",))
        return _inline(env, where, spec.base_dir, c, spec.environment_label)
    return None


def _inline(env: dict, where: Doc, base_dir: Path, c: Collector, label: str) -> EnvSource:
    out = EnvSource("inline", label, where, image=env.get("image") if isinstance(env.get("image"), str) else None)
    build = env.get("build")
    if isinstance(build, dict) and isinstance(build.get("path"), str):
        out.build = build["path"]
    cf = env.get("conda_file")
    if isinstance(cf, dict):
        out.conda, out.conda_dir = Doc(cf, where.file, where.locations, where.at("conda_file")), base_dir
    elif isinstance(cf, str) and not is_remote_ref(cf):
        path = (base_dir / (cf[5:] if cf.startswith("file:") else cf)).resolve()
        out.conda = _read_yaml(path, c, where, where.at("conda_file"))
        out.conda_dir = path.parent
    return out


def _read_yaml(path: Path, c: Collector, parent: Doc, path_in_parent: tuple) -> Doc | None:
    """A YAML file with its locations; its own syntax errors are reported at its own lines."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        sub = parent.collector()  # the reference's line is in the parent file
        sub.error(path_in_parent, f"cannot read {path} ({exc.strerror or exc})", code="missing-path")
        c.items.extend(sub.items)
        return None
    rel = os.path.relpath(path)
    sub = Collector(file=str(path) if rel.startswith("..") else rel)
    loaded = load_text(raw, sub)
    c.items.extend(sub.items)
    if loaded is None:
        return None
    return Doc(loaded.data, sub.file, dict(loaded.locations))
