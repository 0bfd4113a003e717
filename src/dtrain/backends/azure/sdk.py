"""Every private azure-ai-ml call dtrain makes, in one place.

azure-ai-ml has no public call for a job as its REST JSON (what dtrain compares with its own render),
none for a run's details (status and a SAS URL per log file), and none to see a code upload fail
(upload_guard.py). dtrain uses the SDK's internals for these, and only through this module, so that an
SDK upgrade has one place to break. tests/test_azure_sdk_adapter.py checks the installed SDK against
SUPPORTED (pyproject.toml's range) and PRIVATE (each internal used here, with its parameters), so a new
release that moves one fails that test first, naming what moved.

Nothing here imports the SDK at module import time.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Callable

from .unresolved import unresolved_host

# The azure-ai-ml releases these internals are known to hold for; pyproject.toml declares the same range.
SUPPORTED = ">=1.35,<1.36"

# (importable object, attribute, parameters it must accept): what this module relies on.
PRIVATE = (
    ("azure.ai.ml.operations:JobOperations", "_get_job", ("name",)),
    ("azure.ai.ml.operations:JobOperations", "_runs_operations", None),          # a property
    ("azure.ai.ml.operations._run_operations:RunOperations", "get_run_details", ("run_id",)),
    ("azure.ai.ml.entities:CommandJob", "_to_rest_object", ()),                # job_rest without _get_job
    ("azure.ai.ml._utils._asset_utils", "upload_file", None),                   # called as (*args, **kwargs)
    ("azure.ai.ml.operations:JobOperations", "_resolve_job_input", ("entry", "base_path")),
    ("azure.storage.blob._shared.policies:StorageRetryPolicy", "increment", ("settings", "request")),
    ("azure.ai.ml._restclient.runhistory.operations:RunsOperations", "modify_or_delete_tags_by_experiment_name",
     ("subscription_id", "resource_group_name", "workspace_name", "experiment_name", "run_id", "body")),
)

# Where a request is retried: azure-core's policy (ARM calls) and azure-storage's own (datastore and code
# uploads; each storage package carries a copy). Each `increment(settings, ..., error=...)` says whether
# to try again.
RETRY_POLICIES = ("azure.core.pipeline.policies:RetryPolicy",
                  "azure.storage.blob._shared.policies:StorageRetryPolicy",
                  "azure.storage.filedatalake._shared.policies:StorageRetryPolicy",
                  "azure.storage.fileshare._shared.policies:StorageRetryPolicy")
INPUT_MARK = "_dtrain_input_path"


def job_rest(jobs, name: str):
    """The job resource as the service's REST model (JobBase: .as_dict() gives camelCase properties).
    `jobs` is MLClient.jobs. Raises the SDK's ResourceNotFoundError when there is no such job."""
    get_job = getattr(jobs, "_get_job", None)
    if get_job is not None:
        return get_job(name)
    return jobs.get(name)._to_rest_object()


def run_details(jobs, name: str):
    """The run-history details of a job (RunDetails: status, times, error, logFiles name -> SAS URL)."""
    return jobs._runs_operations.get_run_details(name)


def compute_rest(ml, name: str) -> dict | None:
    """The compute resource as REST JSON (camelCase: properties.properties.allocationState, nodeStateCounts,
    errors), which the public Compute entity leaves out; None when there is no such compute."""
    from azure.core.exceptions import ResourceNotFoundError

    ops = ml.compute._operation                 # ComputeOperations' REST client (set in its __init__)
    try:
        rest = ops.get(ml.compute._operation_scope.resource_group_name, ml.compute._workspace_name, name)
    except ResourceNotFoundError:
        return None
    # the ARM models are mappings over the REST JSON (as_dict: camelCase keys, read-only fields kept)
    return rest.as_dict() if hasattr(rest, "as_dict") else dict(rest)


def delete_tags(jobs, ws, experiment: str, name: str, keys: list) -> None:
    """Remove tags from a job: the run history's tag PATCH with tagsToDelete (jobs.update only merges tags;
    `ws` is dtrain's resolved workspace, whose ids the SDK's own update sends too)."""
    jobs._runs_operations._operation.modify_or_delete_tags_by_experiment_name(
        ws.subscription_id, ws.resource_group, ws.workspace_name, experiment, name, {"tagsToDelete": keys})


@contextlib.contextmanager
def upload_file_failures(record: Callable[[BaseException], None]):
    """While inside, every exception raised by the SDK's per-file code upload goes to record(exc) on its
    way out (the SDK's thread pool may never look at it). Without that function (another SDK layout)
    nothing is watched: make_ml_client's show_progress=True path still raises a failed upload."""
    try:
        from azure.ai.ml._utils import _asset_utils
    except ImportError:  # pragma: no cover - another SDK layout
        yield
        return
    original = getattr(_asset_utils, "upload_file", None)
    if original is None:  # pragma: no cover
        yield
        return

    def upload_file(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            record(exc)
            raise

    _asset_utils.upload_file = upload_file
    try:
        yield
    finally:
        _asset_utils.upload_file = original


@contextlib.contextmanager
def input_upload_marks():
    """While inside, an exception raised while the SDK resolves (uploads) a local-path job input carries
    that input's path, as the YAML wrote it, in its attribute INPUT_MARK: the SDK's message names no input."""
    try:
        from azure.ai.ml.operations import JobOperations
    except ImportError:  # pragma: no cover
        yield
        return
    original = JobOperations.__dict__.get("_resolve_job_input")
    if original is None:  # pragma: no cover - another SDK layout
        yield
        return

    def resolve(self, entry, base_path):
        path = getattr(entry, "path", None)
        try:
            return original(self, entry, base_path)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                setattr(exc, INPUT_MARK, str(path))
            raise

    JobOperations._resolve_job_input = resolve  # type: ignore[method-assign]
    try:
        yield
    finally:
        JobOperations._resolve_job_input = original  # type: ignore[method-assign]


def _policy(target: str):
    """The class that defines the policy's increment (azure-core's is on RetryPolicyBase)."""
    module, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):  # that storage package is not installed, or another layout
        return None
    return next((c for c in cls.__mro__ if "increment" in c.__dict__), None)


def _not_for_unresolved(original):
    def increment(self, settings, *args, **kwargs):
        if unresolved_host(kwargs.get("error")) is not None:
            return False          # the name does not exist: no try will find it
        return original(self, settings, *args, **kwargs)

    return increment


@contextlib.contextmanager
def no_retry_on_unresolved_names():
    """While inside, a request whose host name does not resolve (unresolved.py) fails at once instead of
    being retried by azure-core or azure-storage (a minute and a half for a storage upload)."""
    patched: list = []
    for target in RETRY_POLICIES:
        cls = _policy(target)
        original = cls.__dict__["increment"] if cls is not None else None
        if original is not None and all(cls is not done for done, _ in patched):
            cls.increment = _not_for_unresolved(original)
            patched.append((cls, original))
    try:
        yield
    finally:
        for cls, original in reversed(patched):
            cls.increment = original


def datastore_secrets(datastores, name: str):
    """What the SDK signs a datastore's storage requests with (get_datastore_info): listSecrets, asking for an
    expirable secret as the SDK does. `datastores` is MLClient.datastores; the answer has `.key` (AccountKey)
    or `.sas_token` (Sas)."""
    return datastores._list_secrets(name=name, expirable_secret=True)
