"""Azure ML REST API emulator for tests: the real azure-ai-ml SDK talks to it over http on 127.0.0.1.

    from azure_emulator import AzureMLEmulator, make_ml_client        # tests/ is on sys.path under pytest
    from tests.azure_emulator import AzureMLEmulator, make_ml_client  # also works with `python -m pytest`
"""

from .client import AllowHttpOnLoopbackPolicy, StaticTokenCredential, cloud_kwargs, fake_jwt, make_ml_client
from .faults import Fault, TokenExpiry
from .server import AzureMLEmulator
from .spec import PREVIEW_MFE, STABLE_MFE, SpecValidator, load_example, validate_job_body
from .wire import (BLOB_CONTAINER, DEFAULT_SCRIPT, RESOURCE_GROUP, STORAGE_ACCOUNT, STORAGE_SUFFIX, SUBSCRIPTION_ID,
                   TERMINAL_STATUSES, UNRESOLVABLE_SUFFIX, WORKSPACE, RecordedRequest, StatusScript)

__all__ = [
    "AllowHttpOnLoopbackPolicy",
    "AzureMLEmulator",
    "fake_jwt",
    "BLOB_CONTAINER",
    "DEFAULT_SCRIPT",
    "Fault",
    "RESOURCE_GROUP",
    "RecordedRequest",
    "STORAGE_ACCOUNT",
    "STORAGE_SUFFIX",
    "SUBSCRIPTION_ID",
    "PREVIEW_MFE",
    "STABLE_MFE",
    "SpecValidator",
    "StaticTokenCredential",
    "StatusScript",
    "TERMINAL_STATUSES",
    "TokenExpiry",
    "UNRESOLVABLE_SUFFIX",
    "WORKSPACE",
    "cloud_kwargs",
    "load_example",
    "make_ml_client",
    "validate_job_body",
]
