"""A registered environment read from the workspace, for `dtrain validate --env`: its image, its conda file
(the service stores it as YAML text; azure-ai-ml hands it back as a mapping) and whether it is built from a
Docker context. `azureml:NAME:VERSION`, `azureml:NAME@latest` and the workspace's ARM ids; registry
environments (azureml://registries/...) need a registry client and are not read here."""
from __future__ import annotations

import re

_REF = re.compile(r"^azureml:(?!//)(?P<name>[^:@/]+)(?::(?P<version>[^:@/]+)|@(?P<label>[^:@/]+))?$")
_ARM = re.compile(r"/environments/(?P<name>[^/]+)/versions/(?P<version>[^/]+)$", re.I)


def parse(ref: str) -> tuple[str, str | None, str | None] | None:
    """(name, version, label) of a workspace environment reference; None for anything else."""
    m = _REF.match(ref) or _ARM.search(ref)
    if not m or ref.lower().startswith("azureml://registries/"):
        return None
    d = m.groupdict()
    return d["name"], d.get("version"), d.get("label") or (None if d.get("version") else "latest")


def read(ml, ref: str, workspace_name: str) -> dict:
    """{"found": False, "where": ...} or {"found": True, "image", "conda_file" (mapping or None), "build"}."""
    import yaml
    from azure.core.exceptions import ResourceNotFoundError

    parsed = parse(ref)
    if parsed is None:
        return {"found": None, "why": "registry environments are not read (only the workspace's)"}
    name, version, label = parsed
    try:
        env = ml.environments.get(name=name, version=version) if version else ml.environments.get(name=name, label=label)
    except ResourceNotFoundError:
        return {"found": False, "where": f"workspace {workspace_name}"}
    conda = env.conda_file
    if isinstance(conda, str):
        conda = yaml.safe_load(conda)
    return {"found": True, "image": env.image, "conda_file": conda if isinstance(conda, dict) else None,
            "build": bool(env.build), "version": env.version}
