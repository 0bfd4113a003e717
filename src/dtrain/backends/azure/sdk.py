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
from typing import Callable

# The azure-ai-ml releases these internals are known to hold for; pyproject.toml declares the same range.
SUPPORTED = ">=1.35,<1.36"

# (importable object, attribute, parameters it must accept): what this module relies on.
PRIVATE = (
    ("azure.ai.ml.operations:JobOperations", "_get_job", ("name",)),
    ("azure.ai.ml.operations:JobOperations", "_runs_operations", None),          # a property
    ("azure.ai.ml.operations._run_operations:RunOperations", "get_run_details", ("run_id",)),
    ("azure.ai.ml.entities:CommandJob", "_to_rest_object", ()),                # job_rest without _get_job
    ("azure.ai.ml._utils._asset_utils", "upload_file", None),                   # called as (*args, **kwargs)
    ("azure.ai.ml._restclient.runhistory.operations:RunsOperations", "modify_or_delete_tags_by_experiment_name",
     ("subscription_id", "resource_group_name", "workspace_name", "experiment_name", "run_id", "body")),
)


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
