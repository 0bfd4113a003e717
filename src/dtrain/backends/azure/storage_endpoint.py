"""DTRAIN_STORAGE_ENDPOINT: every storage account reached on one loopback server, path-style.

azure-ai-ml builds a datastore's URL as `https://{account}.blob.{suffix}`, a host no loopback server can
answer. dtrain reads a job's logs and outputs from storage itself, so under this one setting it reaches
every account as `{endpoint}/{account}/{container}/{blob}`, as Azurite serves it. The address is checked
as DTRAIN_ARM_ENDPOINT's is (endpoint_url.py: the same parsers, the same meaning of loopback), and
anything but a loopback address is refused: the account keys dtrain signs with must not leave this machine.
"""
from __future__ import annotations

from ...errors import ConfigError
from ...settings import Settings
from .endpoint_url import UnsafeEndpoint, parse_endpoint

ENV_STORAGE_ENDPOINT = "DTRAIN_STORAGE_ENDPOINT"
_HINT = ("unset it to reach storage accounts at https://ACCOUNT.blob.SUFFIX; it is only for a local storage "
         "emulator, e.g. http://127.0.0.1:10000 (127.0.0.1, localhost, ::1)")


def storage_endpoint_from_env(environ=None) -> str | None:
    """The loopback endpoint (without a trailing '/'), None when unset; ConfigError for any other address."""
    raw = (Settings(environ).text(ENV_STORAGE_ENDPOINT) or "").strip()
    if not raw:
        return None
    try:
        parts = parse_endpoint(raw)
    except UnsafeEndpoint as exc:
        raise ConfigError(f"{ENV_STORAGE_ENDPOINT} is refused: {exc}", hint=_HINT) from None
    if not parts.loopback:
        raise ConfigError(f"{ENV_STORAGE_ENDPOINT}='{raw}' is not a loopback address ({parts.host})", hint=_HINT)
    return raw.rstrip("/")


def account_url(account: str, suffix: str | None, endpoint: str | None) -> str:
    """The blob service URL of a storage account: path-style under the loopback endpoint, else Azure's."""
    if endpoint:
        return f"{endpoint}/{account}"
    return f"https://{account}.blob.{suffix or 'core.windows.net'}"
