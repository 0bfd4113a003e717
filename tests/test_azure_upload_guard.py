"""What a failed code upload says: the account (from the blob URL, never its SAS), the storage error
code, what to check, and the exit code (6 refused, 5 failed). No network."""
from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError

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
