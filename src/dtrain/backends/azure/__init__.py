"""The Azure ML backend: everything dtrain knows of Azure lives in this package (the backend, workspace
discovery, credentials, the SDK adapter), and nothing outside it imports azure (tests/test_walls.py).

This file stays lean on purpose: `dtrain config` reads the workspace (workspace.py) without loading the
backend, and nothing here imports the SDK. AzureBackend and AzurePlan load on first use.

  backend.py         AzureBackend: submit, status, logs, cancel, list
  plan.py            AzurePlan: what submit sends, as a value (no SDK, no network)
  workspace.py       which workspace, and where each part came from (no SDK, no `az`)
  client.py          MLClient: endpoint, credentials, loopback-only http, a quiet SDK
  ci_credentials.py  GitHub OIDC (github_oidc.py) and Azure Pipelines credentials, ahead of the default chain
  sdk.py             every private azure-ai-ml call, in one place (tests/test_azure_sdk_adapter.py)
  logs.py            every rank's log lines, read incrementally
  errors.py          SDK and azure-core exceptions as dtrain errors
  upload_guard.py    a code upload that storage refuses ends the submit instead of hanging it
  endpoint_url.py    DTRAIN_ARM_ENDPOINT, checked the way the HTTP stack reads it
"""
from __future__ import annotations

__all__ = ["AzureBackend", "AzurePlan"]


def __getattr__(name: str):
    if name == "AzureBackend":
        from .backend import AzureBackend

        return AzureBackend
    if name == "AzurePlan":
        from .plan import AzurePlan

        return AzurePlan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
