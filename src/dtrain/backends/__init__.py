"""Backends: where a job runs. Imported lazily by name so that the Azure SDK loads only when used."""
from __future__ import annotations

from .base import Backend


def get_backend(name: str, **options) -> Backend:
    if name == "local":
        from .local import LocalBackend

        return LocalBackend()
    if name == "azureml":
        from .azure import AzureBackend

        return AzureBackend(**options)
    raise ValueError(f"unknown backend {name!r}")
