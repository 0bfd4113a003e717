"""dtrain: Azure ML command jobs, validated offline, run here or on Azure ML. The Python API is the
Runner (docs/python-api.md); these names are imported lazily, so `import dtrain` stays cheap."""
from __future__ import annotations

__version__ = "0.1.0"

_API = {
    "Runner": "dtrain.runner", "Workspace": "dtrain.workspace", "SubmitOptions": "dtrain.backends.base",
    "JobInfo": "dtrain.backends.base", "JobStatus": "dtrain.status", "load_spec": "dtrain.spec.validate",
    "follow": "dtrain", "DtrainError": "dtrain.errors",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    import importlib

    if name == "follow":
        return importlib.import_module("dtrain.follow")
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'dtrain' has no attribute {name!r}")
