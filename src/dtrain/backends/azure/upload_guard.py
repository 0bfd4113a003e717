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

A dropped connection during an upload is retried by azure-storage's own retry policy.
"""
from __future__ import annotations

import contextlib
import threading
import time
from urllib.parse import urlsplit

from ...errors import BackendError, ConfigError
from ...untrusted import redact
from .sdk import upload_file_failures

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

    with _watching_uploads(watch):
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
    seen = []
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
    url = _storage_url(_with_response(exc))
    if not url:
        return False
    parts = urlsplit(url)
    return ".blob." in (parts.hostname or "") or "/LocalUpload/" in parts.path


def storage_account(exc) -> str | None:
    """The account from the blob URL (ACCOUNT.blob.SUFFIX, or path-style http://host/ACCOUNT/...).
    Only the name: the URL carries a SAS signature."""
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
    text = redact(str(getattr(exc, "message", None) or exc)).strip()   # storage echoes the SAS URL
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:300]


def upload_error(exc, job: str):
    """The dtrain error for a failed code upload: storage refused it (403/401: exit 6) or failed (5)."""
    inner = _with_response(exc)
    account = storage_account(inner) or "the workspace's storage account"
    status, code = _status(inner), _error_code(inner)
    what = f"HTTP {status}" + (f" {code}" if code and code != "Error" else "") if status else type(exc).__name__
    if status in (401, 403):
        return ConfigError(
            f"storage account '{account}' refused the code upload for job '{job}' ({what}: {_reason(exc)}); "
            "nothing was submitted",
            hint=f"check that the network may reach '{account}' (Azure portal > storage account > Networking: a "
                 "firewall or private endpoint that does not admit this machine answers AuthorizationFailure), "
                 "and that the identity you sign in with has the 'Storage Blob Data Contributor' role on it "
                 "(without it: AuthorizationPermissionMismatch)")
    return BackendError(f"the code upload to storage account '{account}' for job '{job}' failed ({what}: "
                        f"{_reason(exc)}); nothing was submitted",
                        hint="storage is unavailable or the connection keeps dropping; run the same command again "
                             "(unchanged files already uploaded are not sent twice)")
