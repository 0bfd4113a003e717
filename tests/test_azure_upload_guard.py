"""What a failed upload says (the code or a local input): the account (from the blob URL, never its SAS, or
the host that did not resolve), the storage error code, what to check, and the exit code (6 refused or
unresolvable, 5 failed); the SDK's coloured messages cleaned; no retry of a name that does not resolve.
No network."""
from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from azure.core.exceptions import HttpResponseError, ServiceRequestError

from dtrain.backends.azure import sdk
from dtrain.backends.azure.errors import sdk_message, translate, transient
from dtrain.backends.azure.unresolved import unresolved_host
from dtrain.backends.azure.upload_guard import is_storage_failure, upload_error
from dtrain.exitcodes import ExitCode


def storage_error(status, code, url="https://acct1.blob.core.windows.net/c/LocalUpload/x/a.py?sv=1&sig=SECRET"):
    class Request:
        pass

    class Response:
        pass

    req, resp = Request(), Response()
    req.url = url
    resp.request, resp.status_code, resp.headers, resp.reason = req, status, {"x-ms-error-code": code}, "x"
    err = HttpResponseError(message=f"{code} sig=SECRET")
    err.response, err.status_code = resp, status
    return err


@pytest.mark.parametrize("status,code,exit_code", [(403, "AuthorizationFailure", ExitCode.CONFIG),
                                                   (403, "AuthorizationPermissionMismatch", ExitCode.CONFIG),
                                                   (401, "InvalidAuthenticationInfo", ExitCode.CONFIG),
                                                   (503, "ServerBusy", ExitCode.INFRA)])
def test_upload_failures_name_the_account_and_never_the_sas(status, code, exit_code):
    exc = storage_error(status, code)
    assert is_storage_failure(exc)
    err = upload_error(exc, "job-1")
    assert err.exit_code == exit_code
    assert "'acct1'" in err.message and code in err.message and "nothing was submitted" in err.message
    assert "SECRET" not in err.message + (err.hint or "")
    if exit_code == ExitCode.CONFIG:
        assert "Storage Blob Data Contributor" in err.hint and "Networking" in err.hint


def test_an_sdk_exception_raised_from_a_storage_error_is_one():
    try:
        try:
            raise storage_error(403, "AuthorizationPermissionMismatch")
        except HttpResponseError as inner:
            raise Exception("You don't have permission to alter this storage account.") from inner
    except Exception as outer:
        assert is_storage_failure(outer)
        err = upload_error(outer, "job-1")
    assert err.exit_code == ExitCode.CONFIG and "'acct1'" in err.message and "permission" in err.message


def test_path_style_accounts_and_non_storage_errors():
    exc = storage_error(403, "AuthorizationFailure", "http://127.0.0.1:9/devacct/c/LocalUpload/x/a.py?sig=S")
    assert is_storage_failure(exc) and "'devacct'" in upload_error(exc, "j").message
    arm = storage_error(403, "AuthorizationFailed", "https://management.azure.com/subscriptions/s/jobs/j")
    assert not is_storage_failure(arm)
    assert not is_storage_failure(ValueError("no response"))


# --- hosts that do not resolve, local inputs, the SDK's coloured messages --------------------------------

def unresolved(host="acct2.blob.storage.invalid", errno=socket.EAI_NONAME):
    """What azure-core raises for a name that does not resolve: ServiceRequestError over urllib3's
    NameResolutionError over socket.gaierror."""
    from urllib3.exceptions import NameResolutionError

    gai = socket.gaierror(errno, "Name or service not known")
    resolution = NameResolutionError(host, None, gai)  # type: ignore[arg-type]
    resolution.__cause__ = gai                          # urllib3 raises it `from` the gaierror
    return ServiceRequestError(str(resolution), error=resolution)


def through_the_sdk(inner, path="./data"):
    """inner as azure-ai-ml hands it on: a ValidationException raised from it while resolving a local
    input (marked with its path by sdk.input_upload_marks), then a coloured MlException."""
    from azure.ai.ml.exceptions import MlException, ValidationException

    try:
        try:
            try:
                raise inner
            except Exception as exc:
                raise ValidationException(message=f"Met {type(exc)}:\n{exc}", no_personal_data_message="x") from exc
        except ValidationException as exc:
            setattr(exc, sdk.INPUT_MARK, path)
            raise MlException(message=COLOURED.format(detail=str(exc)), no_personal_data_message="x")
    except MlException as outer:
        return outer


COLOURED = ("\n\x1b[37m\n\x1b[30m\n1) One or more fields are invalid\x1b[39m\x1b[39m\n\nDetails: \n\n"
            "\x1b[31m(x) {detail}\x1b[39m\n\nResolutions: \n1) Double-check that all specified parameters are of "
            "the correct types")


def test_an_sdk_message_that_starts_with_colour_codes_keeps_its_text():
    from azure.ai.ml.exceptions import MlException

    exc = MlException(message=COLOURED.format(detail="Supported input path value are ARM id or local path."),
                      no_personal_data_message="x")
    text = sdk_message(exc)
    assert text == "Supported input path value are ARM id or local path."
    plain = sdk_message(ValueError("\x1b[31mboom\x1b[0m sig=SECRET\nsecond line"))
    assert plain == "boom sig=***" and "\x1b" not in plain
    err = translate(exc, what="submit job 'j'")
    assert "\x1b" not in err.message and "Supported input path" in err.message


@pytest.mark.parametrize("errno,host,definitive", [(socket.EAI_NONAME, "a.blob.core.windows.net", True),
                                                   (socket.EAI_AGAIN, "a.blob.core.windows.net", False),
                                                   (socket.EAI_AGAIN, "a.blob.storage.invalid", True)])
def test_only_a_name_that_does_not_exist_counts_as_unresolved(errno, host, definitive):
    found = unresolved_host(unresolved(host, errno))
    assert (found == host) if definitive else found is None
    assert transient(unresolved(host, errno)) is not definitive
    assert unresolved_host(ValueError("Failed to resolve 'x'")) is None


def test_an_input_upload_to_a_host_that_does_not_resolve_names_the_input_and_the_account():
    exc = through_the_sdk(unresolved())
    assert is_storage_failure(exc)
    err = upload_error(exc, "az1", {"training_data": "data", "other": "./other"}, "src")
    assert err.exit_code == ExitCode.CONFIG
    assert "input 'training_data' (./data)" in err.message and "storage account 'acct2'" in err.message
    assert "'acct2.blob.storage.invalid' does not resolve" in err.message and "\x1b" not in err.message
    assert "DNS" in err.hint


def test_an_input_upload_refused_with_403_names_the_input_and_the_account():
    exc = through_the_sdk(storage_error(403, "AuthorizationFailure"))
    err = upload_error(exc, "az1", {"training_data": "./data"}, "src")
    assert err.exit_code == ExitCode.CONFIG and "SECRET" not in err.message and "\x1b" not in err.message
    assert "storage account 'acct1' refused the upload of input 'training_data' (./data)" in err.message


def test_the_code_upload_names_its_folder():
    err = upload_error(storage_error(403, "AuthorizationFailure"), "j", {}, "src")
    assert "refused the code upload (folder 'src')" in err.message


def test_no_retry_for_a_name_that_does_not_resolve():
    """azure-storage would try a datastore upload 4 times, 15 s and more apart: inside the guard, a name
    that does not resolve is tried once; other connection failures keep their retries."""
    from azure.core.pipeline.policies import RetryPolicy
    from azure.storage.blob._shared.policies import ExponentialRetry

    storage, core = ExponentialRetry(), RetryPolicy()
    settings = lambda: {"total": 3, "connect": 3, "read": 3, "status": 3, "retry_secondary": False,  # noqa: E731
                        "history": [], "body_position": None, "count": 0, "backoff": 0.8,
                        "methods": set(), "timeout": 100}
    request = SimpleNamespace(method="GET", body=None)
    with sdk.no_retry_on_unresolved_names():
        assert storage.increment(settings(), request=request, error=unresolved()) is False
        assert core.increment(settings(), response=None, error=unresolved()) is False
        assert storage.increment(settings(), request=request, error=ServiceRequestError("reset")) is True
    assert storage.increment(settings(), request=request, error=unresolved()) is True   # put back
