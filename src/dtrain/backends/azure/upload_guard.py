"""A code upload that storage refuses ends the submit, with what to check, instead of hanging it.

azure-ai-ml (1.35.2) uploads a `code:` folder with a thread pool. With show_progress=False it never
reads the workers' results, then waits in `while uploaded_file_count < total_file_count: sleep(0.5)`
for a count that a failed upload never reaches: a blob PUT answered 403 (a storage firewall, a
missing "Storage Blob Data Contributor" role) hangs the submit forever, silently. So:

1. make_ml_client passes show_progress=True: on that path the SDK reads each worker's result and
   raises the first failure (its progress bar goes to muted_stderr and is dropped);
2. as a safety net, guarded() runs the SDK call in a worker thread and watches the SDK's
   per-file upload function (sdk.upload_file_failures): once an upload has failed, the call gets
   UPLOAD_GRACE_S to end on its own, then it is abandoned (a daemon thread) and that failure is raised.

A dropped connection during an upload is retried by azure-storage's own retry policy; a storage host
whose name does not resolve is not (unresolved.py): that failure ends the submit at once, exit 6.

The same goes for local-path inputs, which the SDK uploads to the workspace's default datastore
(https://ACCOUNT.blob.SUFFIX) before the code: the error names the input (sdk.input_upload_marks) and
the account, where the SDK's own message names neither.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from urllib.parse import urlsplit

from ...errors import BackendError, ConfigError
from .errors import sdk_message
from .sdk import INPUT_MARK, input_upload_marks, no_retry_on_unresolved_names, upload_file_failures
from .unresolved import unresolved_host

UPLOAD_GRACE_S = 10.0
_MARK = "_dtrain_code_upload"


class _Watch:
    def __init__(self):
        self.failures: list[BaseException] = []
        self.first_failure: float | None = None
        self._lock = threading.Lock()

    def record(self, exc: BaseException) -> None:
        with self._lock:
            self.failures.append(exc)
            if self.first_failure is None:
                self.first_failure = time.monotonic()


def _watching_uploads(watch: _Watch):
    def record(exc: BaseException) -> None:
        with contextlib.suppress(Exception):
            setattr(exc, _MARK, True)
        watch.record(exc)

    return upload_file_failures(record)


def guarded(call, grace_s: float = UPLOAD_GRACE_S):
    """call() in a worker thread; returns its result or raises its exception, or, once a code upload
    has failed and call() has not ended within grace_s, raises that upload failure."""
    watch = _Watch()
    box: dict = {}

    def run():
        try:
            box["result"] = call()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    with _watching_uploads(watch), input_upload_marks(), no_retry_on_unresolved_names():
        worker = threading.Thread(target=run, name="dtrain-submit", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
            if worker.is_alive() and watch.first_failure is not None \
                    and time.monotonic() - watch.first_failure > grace_s:
                raise watch.failures[0]
    if "error" in box:
        raise box["error"]
    return box.get("result")


# --- what to say -------------------------------------------------------------------------------------

def _chain(exc):
    """exc and what it was raised from: the SDK re-raises some storage errors as its own exceptions."""
    seen: list = []
    while exc is not None and exc not in seen and len(seen) < 8:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _with_response(exc):
    return next((e for e in _chain(exc) if getattr(getattr(e, "response", None), "request", None)), exc)


def _storage_url(exc) -> str | None:
    response = getattr(exc, "response", None)
    request = getattr(response, "request", None)
    return getattr(request, "url", None)


def is_storage_failure(exc) -> bool:
    """A failure of the code upload (marked on its way out of the SDK, or answered by a blob endpoint)."""
    if any(getattr(e, _MARK, False) for e in _chain(exc)):
        return True
    host = unresolved_host(exc)
    if host is not None and (_storage_host(host) or _input_path(exc) is not None):
        return True
    url = _storage_url(_with_response(exc))
    if not url:
        return False
    parts = urlsplit(url)
    return ".blob." in (parts.hostname or "") or "/LocalUpload/" in parts.path


def _storage_host(host: str) -> bool:
    return any(f".{kind}." in host for kind in ("blob", "dfs", "file"))


def _input_path(exc) -> str | None:
    """The local path of the job input whose upload raised exc (sdk.input_upload_marks), if it was one."""
    return next((getattr(e, INPUT_MARK) for e in _chain(exc) if getattr(e, INPUT_MARK, None)), None)


def storage_account(exc) -> str | None:
    """The account from the blob URL (ACCOUNT.blob.SUFFIX, or path-style http://host/ACCOUNT/...), or from
    the storage host that did not resolve. Only the name: the URL carries a SAS signature."""
    host = unresolved_host(exc)
    if host and _storage_host(host):
        return host.split(".", 1)[0]
    url = _storage_url(exc)
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ".blob." in host:
        return host.split(".", 1)[0]
    first = parts.path.strip("/").split("/", 1)[0]
    return first or None


def _status(exc) -> int | None:
    return getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)


def _error_code(exc) -> str | None:
    code = getattr(exc, "error_code", None)
    if code:
        return str(getattr(code, "value", code))         # azure-storage hands a StorageErrorCode enum
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    return headers.get("x-ms-error-code")


def _reason(exc) -> str:
    return sdk_message(exc, limit=300)      # redacted: storage echoes the SAS URL


def _subject(exc, inputs: dict | None, code: str | None) -> str:
    """What was being uploaded: a local input (named from its path, sdk.input_upload_marks) or the code."""
    path = _input_path(exc)
    if path is None:
        return f"the code upload (folder '{code}')" if code else "the code upload"
    names = [n for n, p in (inputs or {}).items() if os.path.normpath(str(p)) == os.path.normpath(path)]
    return f"the upload of input '{names[0]}' ({path})" if names else f"the upload of the local input {path}"


def _unresolved_error(job: str, subject: str, account: str, host: str) -> ConfigError:
    return ConfigError(
        f"{subject} for job '{job}' failed: storage account '{account}' cannot be reached, its host name "
        f"'{host}' does not resolve; nothing was submitted",
        hint=f"check that storage account '{account}' exists (the workspace's default datastore names it) and "
             f"that this machine's DNS resolves '{host}': an account behind a private endpoint resolves only "
             "through its private DNS zone (privatelink.blob.core.windows.net) on this network; "
             "DTRAIN_STORAGE_SUFFIX is the storage suffix of another cloud (docs/azure.md)")


def upload_error(exc, job: str, inputs: dict | None = None, code: str | None = None):
    """The dtrain error for a failed upload (the code, or a local input: `inputs` maps input names to their
    paths): storage unreachable by name or refusing it (403/401: exit 6), or failing (5)."""
    inner = _with_response(exc)
    account = storage_account(inner) or "the workspace's storage account"
    subject = _subject(exc, inputs, code)
    host = unresolved_host(exc)
    if host is not None:
        return _unresolved_error(job, subject, account, host or "?")
    status, error_code = _status(inner), _error_code(inner)
    what = f"HTTP {status}" + (f" {error_code}" if error_code and error_code != "Error" else "") if status \
        else type(exc).__name__
    if status in (401, 403):
        return ConfigError(
            f"storage account '{account}' refused {subject} for job '{job}' ({what}: {_reason(exc)}); "
            "nothing was submitted",
            hint=f"check that the network may reach '{account}' (Azure portal > storage account > Networking: a "
                 "firewall or private endpoint that does not admit this machine answers AuthorizationFailure), "
                 "and that the identity you sign in with has the 'Storage Blob Data Contributor' role on it "
                 "(without it: AuthorizationPermissionMismatch)")
    return BackendError(f"{subject} to storage account '{account}' for job '{job}' failed ({what}: "
                        f"{_reason(exc)}); nothing was submitted",
                        hint="storage is unavailable or the connection keeps dropping; run the same command again "
                             "(unchanged files already uploaded are not sent twice)")
