"""SDK and azure-core exceptions, as dtrain errors with an exit code and a hint."""
from __future__ import annotations

import contextlib
import re

from ...errors import BackendError, ConfigError, DtrainError, JobNotFound, UsageError
from ...untrusted import redact
from .client import AUTH_HINT
from .unresolved import unresolved_host

# CSI (colours: ESC [ ... m), OSC (ESC ] ... BEL or ESC \\) and two-character escapes
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_USER_ERRORS = ("ValidationException", "ValidationError", "JobException", "UserErrorException")


def transient(exc: BaseException) -> bool:
    """Worth trying again: connection problems, throttling and 5xx answers."""
    from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

    if unresolved_host(exc) is not None:        # a name that does not exist stays so
        return False
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


def _details(lines: list[str]) -> str | None:
    """The "Details:" section of azure-ai-ml's formatted message (MlException), up to "Resolutions:"."""
    if "Details:" not in lines:
        return None
    start = lines.index("Details:") + 1
    end = next((i for i in range(start, len(lines))
                if lines[i] == "Resolutions:" or lines[i].startswith("Additional Resources:")), len(lines))
    return " ".join(line.removeprefix("(x) ") for line in lines[start:end]) or None


def sdk_message(exc: BaseException, limit: int = 500) -> str:
    """The exception's message as one line, without terminal escapes: azure-ai-ml's MlException starts
    with colour codes and a generic "1) One or more fields are invalid", so its "Details:" are kept instead.
    Redacted whole before the cut (the service's text may echo the token sent, a SAS URL or a key), so a
    cut cannot split a secret out of its pattern."""
    text = _ESCAPES.sub("", str(getattr(exc, "message", None) or str(exc) or ""))
    lines = [line.strip() for line in redact(text).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return (_details(lines) or lines[0])[:limit]


def _message(exc: BaseException) -> str:
    return sdk_message(exc)


def _chain_names(exc: BaseException) -> set[str]:
    names: set[str] = set()
    e: BaseException | None = exc
    for _ in range(8):
        if e is None:
            break
        names.add(type(e).__name__)
        e = e.__cause__ or e.__context__
    return names


def _unexpected(exc: BaseException, what: str) -> DtrainError:
    """An exception of no known family: the SDK's refusals (usage), a host that does not exist (config)."""
    host = unresolved_host(exc)
    if host is not None:
        return ConfigError(f"cannot reach Azure to {what}: the host name '{host or '?'}' does not resolve",
                           hint="check the name (DTRAIN_ARM_ENDPOINT, DTRAIN_STORAGE_SUFFIX if set) and this "
                                "machine's DNS; nothing was retried, as no retry can resolve it")
    name = type(exc).__name__
    if _chain_names(exc) & set(_USER_ERRORS):
        return UsageError(f"azure-ai-ml refused to {what}: {_message(exc)}", hint="nothing was submitted")
    return BackendError(f"failed to {what}: {name}: {_message(exc)}",
                        hint="`dtrain --debug` with the same command shows the SDK's traceback")


def translate(exc: BaseException, *, what: str, job: str | None = None, workspace=None) -> DtrainError:
    """A dtrain error for an exception raised while doing `what`."""
    if isinstance(exc, DtrainError):
        return exc
    from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ResourceNotFoundError,
                                       ServiceRequestError, ServiceResponseError)

    try:
        from azure.identity import CredentialUnavailableError
    except ImportError:  # pragma: no cover
        CredentialUnavailableError = ClientAuthenticationError  # type: ignore[misc,assignment]  # noqa: N806  (fallback class)

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
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)) and unresolved_host(exc) is None:
        return BackendError(f"cannot reach Azure ML to {what}: {_message(exc)}",
                            hint="check the network (and DTRAIN_ARM_ENDPOINT if set); try again")
    return _unexpected(exc, what)


@contextlib.contextmanager
def azure_errors(what: str, *, job: str | None = None, workspace=None):
    try:
        yield
    except DtrainError:
        raise
    except Exception as exc:  # SDK and azure-core exceptions
        raise translate(exc, what=what, job=job, workspace=workspace) from exc
