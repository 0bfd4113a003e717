"""SDK and azure-core exceptions, as dtrain errors with an exit code and a hint."""
from __future__ import annotations

import contextlib

from ...errors import BackendError, ConfigError, DtrainError, JobNotFound, UsageError
from ...untrusted import redact
from .client import AUTH_HINT


def transient(exc: BaseException) -> bool:
    """Worth trying again: connection problems, throttling and 5xx answers."""
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ConnectionError, TimeoutError)):
        return True
    from .mlflow_rest import MlflowError

    if isinstance(exc, MlflowError):
        return exc.transient
    if isinstance(exc, HttpResponseError):
        code = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
        return code in (408, 429) or (code is not None and code >= 500)
    try:
        import requests

        if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
            return True
    except ImportError:  # pragma: no cover
        pass
    return False


def _message(exc: BaseException) -> str:
    """The exception's first line, redacted: the service's text may echo the token sent, a SAS URL or a
    key (untrusted.py). Redacted whole before the cut, so a cut cannot split a secret out of its pattern."""
    msg = redact(str(getattr(exc, "message", None) or str(exc) or type(exc).__name__)).strip()
    msg = msg.splitlines()[0] if msg else type(exc).__name__
    return msg[:500]


def translate(exc: BaseException, *, what: str, job: str | None = None, workspace=None) -> DtrainError:
    """A dtrain error for an exception raised while doing `what`."""
    if isinstance(exc, DtrainError):
        return exc
    from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ResourceNotFoundError,
                                       ServiceRequestError, ServiceResponseError)

    try:
        from azure.identity import CredentialUnavailableError
    except ImportError:  # pragma: no cover
        CredentialUnavailableError = ClientAuthenticationError  # type: ignore[misc]  # noqa: N806  (fallback class)

    ws = f" in workspace {workspace.workspace_name} (resource group {workspace.resource_group}, subscription " \
         f"{workspace.subscription_id}, from {workspace.source})" if workspace is not None else ""
    if isinstance(exc, (CredentialUnavailableError, ClientAuthenticationError)):
        return ConfigError(f"Azure authentication failed while trying to {what}: {_message(exc)}", hint=AUTH_HINT)
    if isinstance(exc, ResourceNotFoundError):
        text = _message(exc)
        if job and ("job" in text.lower() or "run" in text.lower()) and "workspace" not in text.lower():
            return JobNotFound(f"no Azure ML job named '{job}'{ws}", hint="`dtrain list` shows the jobs")
        return ConfigError(f"not found while trying to {what}{ws}: {text}",
                           hint="`dtrain config` shows where each part of the workspace came from; fix it there "
                                "or override it with --subscription/--resource-group/--workspace")
    if isinstance(exc, HttpResponseError):
        code = getattr(exc, "status_code", None)
        if code in (401, 403):
            return ConfigError(f"Azure refused to {what}{ws} (HTTP {code}): {_message(exc)}",
                               hint="the signed-in identity needs a role on the workspace (e.g. AzureML Data "
                                    "Scientist); " + AUTH_HINT)
        if code is not None and 400 <= code < 500 and code not in (408, 429):
            return UsageError(f"Azure ML rejected the request to {what} (HTTP {code}): {_message(exc)}",
                              hint="nothing was submitted" if what.startswith("submit") else None)
        return BackendError(f"Azure ML failed to {what} (HTTP {code}): {_message(exc)}",
                            hint="the service is unavailable or throttling; try again")
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return BackendError(f"cannot reach Azure ML to {what}: {_message(exc)}",
                            hint="check the network (and DTRAIN_ARM_ENDPOINT if set); try again")
    name = type(exc).__name__
    if name in ("ValidationException", "ValidationError", "JobException", "UserErrorException"):
        return UsageError(f"azure-ai-ml refused to {what}: {_message(exc)}", hint="nothing was submitted")
    return BackendError(f"failed to {what}: {name}: {_message(exc)}")


@contextlib.contextmanager
def azure_errors(what: str, *, job: str | None = None, workspace=None):
    try:
        yield
    except DtrainError:
        raise
    except Exception as exc:  # SDK and azure-core exceptions
        raise translate(exc, what=what, job=job, workspace=workspace) from exc
