"""Building azure-ai-ml's MLClient: credentials, endpoint and the loopback-only http policy.

Settings (environment):
  DTRAIN_ARM_ENDPOINT   resource-manager endpoint (custom / sovereign clouds, or an emulator).
  DTRAIN_ARM_TOKEN      a static bearer token: ONLY with a loopback DTRAIN_ARM_ENDPOINT.
  DTRAIN_ARM_TOKEN_FILE a file holding that token, read again on every token request (so a token
                        rotated in the file is picked up after a 401 challenge): loopback only too.
Plain http is accepted only for 127.0.0.0/8, localhost and ::1; anything else must be https.
Without a static token the credential is azure-identity's DefaultAzureCredential.

Nothing here is imported unless an Azure command runs. The SDK's warnings, loggers and progress
bars are silenced before it is imported (quiet()).
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import re
import sys
import threading
import time
import warnings
from dataclasses import dataclass

from ...errors import ConfigError
from ...untrusted import remember_secret
from ...settings import Settings
from ...settings import current as settings
from .endpoint_url import UnsafeEndpoint, is_loopback_host, parse_endpoint

ENV_ENDPOINT = "DTRAIN_ARM_ENDPOINT"
ENV_TOKEN = "DTRAIN_ARM_TOKEN"
ENV_TOKEN_FILE = "DTRAIN_ARM_TOKEN_FILE"
ENV_RETRY_TOTAL = "DTRAIN_AZURE_RETRIES"            # azure-core retries per HTTP call (default 5)
ENV_RETRY_BACKOFF = "DTRAIN_AZURE_RETRY_BACKOFF_S"  # azure-core backoff factor (default 0.8 s)
PUBLIC_ARM = "https://management.azure.com"

AUTH_HINT = ("sign in with `az login`, or set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET "
             "(service principal), or AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE "
             "(workload identity); GitHub OIDC and Azure Pipelines service connections: see docs/ci.md; "
             "on Azure VMs a managed identity is used")


@dataclass(frozen=True)
class Endpoint:
    url: str                 # without a trailing '/'
    loopback: bool
    custom: bool             # DTRAIN_ARM_ENDPOINT was set
    token: str | None = None
    token_file: str | None = None

    @property
    def cloud_name(self) -> str:
        # MLClient keeps the endpoints of a cloud name it has seen: one name per endpoint.
        return "Dtrain_" + re.sub(r"[^A-Za-z0-9]", "_", self.url.split("://", 1)[-1])

    def mlclient_kwargs(self) -> dict:
        if not self.custom:
            return {}
        authority = os.environ.get("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com").rstrip("/")
        return {
            "cloud": self.cloud_name,
            "cloud_metadata": {
                "azure_portal": self.url + "/portal/" if self.loopback else "https://portal.azure.com/",
                "resource_manager": self.url + "/",
                "active_directory": (self.url + "/login/") if self.loopback else authority + "/",
                "aml_resource_id": self.url + "/",
                "storage_endpoint": settings().text("DTRAIN_STORAGE_SUFFIX"),
                "registry_discovery_endpoint": self.url + "/",
            },
        }


def endpoint_from_env(environ=None) -> Endpoint:
    """The endpoint settings, checked: http and static tokens only on loopback (ConfigError otherwise)."""
    env = Settings(environ)
    raw = env.text(ENV_ENDPOINT) or ""
    if not raw.strip():
        raw = ""
    token = env.text(ENV_TOKEN)
    token_file = env.text(ENV_TOKEN_FILE)
    if not raw:
        if token or token_file:
            which = ENV_TOKEN if token else ENV_TOKEN_FILE
            raise ConfigError(f"{which} is set but {ENV_ENDPOINT} is not: a static token is only accepted for a "
                              "loopback endpoint (an emulator on 127.0.0.1/localhost/::1)",
                              hint=f"unset {which} and use `az login` or the AZURE_* variables; " + AUTH_HINT)
        return Endpoint(PUBLIC_ARM, loopback=False, custom=False)
    try:
        parts = parse_endpoint(raw)
    except UnsafeEndpoint as exc:
        raise ConfigError(f"{ENV_ENDPOINT} is refused: {exc}",
                          hint="write e.g. https://management.usgovcloudapi.net or http://127.0.0.1:8080") from None
    loopback = parts.loopback
    if parts.scheme == "http" and not loopback:
        raise ConfigError(f"{ENV_ENDPOINT}='{raw}' uses plain http to a non-loopback address; bearer tokens "
                          "are only sent over https",
                          hint="use an https:// endpoint (plain http is allowed only for 127.0.0.1, localhost, ::1)")
    if (token or token_file) and not loopback:
        which = ENV_TOKEN if token else ENV_TOKEN_FILE
        raise ConfigError(f"{which} is only accepted with a loopback {ENV_ENDPOINT} (127.0.0.1, localhost, ::1), "
                          f"not {parts.host}",
                          hint=f"unset {which}; real endpoints authenticate through azure-identity: " + AUTH_HINT)
    url = raw.rstrip("/")
    return Endpoint(url, loopback=loopback, custom=True, token=token, token_file=token_file)


# --- credentials -----------------------------------------------------------------------------------

def _jwt_exp(token: str) -> int | None:
    try:
        payload = token.split(".")[1]
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return int(data["exp"])
    except Exception:  # not a JWT, or no exp: an opaque token
        return None


class StaticTokenCredential:
    """A TokenCredential handing out DTRAIN_ARM_TOKEN (or the content of DTRAIN_ARM_TOKEN_FILE, read on
    every request, so a rotated token is picked up when the service challenges the old one).
    Used only for loopback endpoints (see endpoint_from_env). The token is never logged."""

    def __init__(self, token: str | None = None, token_file: str | None = None):
        self._token, self._file = token, token_file
        self._lock = threading.Lock()

    def _current(self) -> str:
        if self._file:
            try:
                with open(self._file, encoding="utf-8") as f:
                    tok = f.read().strip()
            except OSError as exc:
                raise ConfigError(f"cannot read {ENV_TOKEN_FILE} ({exc.strerror})") from None
            if tok:
                remember_secret(tok)      # a rotated token is new to the registry
                return tok
        if self._token:
            return self._token
        raise ConfigError(f"{ENV_TOKEN_FILE} is empty")

    def _expiry(self, tok: str) -> int:
        # An opaque token gets a short life, so a rotated file is re-read often.
        return _jwt_exp(tok) or int(time.time()) + 300

    def get_token(self, *scopes, claims=None, tenant_id=None, enable_cae=False, **kwargs):
        from azure.core.credentials import AccessToken

        with self._lock:
            tok = self._current()
        return AccessToken(tok, self._expiry(tok))

    def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo

        with self._lock:
            tok = self._current()
        return AccessTokenInfo(tok, self._expiry(tok))

    def close(self) -> None:
        pass

    def __repr__(self) -> str:  # never show the token
        return "StaticTokenCredential(<hidden>)"


# Variables whose values are secrets dtrain or azure-identity send; a service error or an SDK traceback
# that echoes one is redacted (untrusted.py).
SECRET_VARIABLES = (ENV_TOKEN, "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_PASSWORD",
                    "SYSTEM_ACCESSTOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")


def remember_env_secrets(env=None) -> None:
    env = os.environ if env is None else env
    for name in SECRET_VARIABLES:
        remember_secret(env.get(name))


class RememberingCredential:
    """A TokenCredential that registers every access token it hands out (untrusted.remember_secret)
    before azure-core sends it, so a service error that echoes the token in use is redacted."""

    def __init__(self, credential):
        self.credential = credential

    def get_token(self, *scopes, **kwargs):
        tok = self.credential.get_token(*scopes, **kwargs)
        remember_secret(tok.token)
        return tok

    def get_token_info(self, *scopes, options=None):
        if not hasattr(self.credential, "get_token_info"):   # an older TokenCredential: get_token only
            from azure.core.credentials import AccessTokenInfo

            tok = self.get_token(*scopes, **(options or {}))
            return AccessTokenInfo(tok.token, tok.expires_on)
        info = self.credential.get_token_info(*scopes, options=options)
        remember_secret(info.token)
        return info

    def close(self) -> None:
        close = getattr(self.credential, "close", None)
        if close is not None:
            close()

    def __enter__(self):
        return self

    def __exit__(self, *args) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RememberingCredential({self.credential!r})"


def make_credential(endpoint: Endpoint, **identity_options):
    """The credential chain (docs/azure.md, Credentials). identity_options go to every azure-identity
    credential built here (e.g. transport=, for tests)."""
    remember_env_secrets()
    if endpoint.token or endpoint.token_file:
        return StaticTokenCredential(endpoint.token, endpoint.token_file)
    from azure.identity import ChainedTokenCredential, DefaultAzureCredential

    from .ci_credentials import ci_credentials

    # environment (service principal), workload identity (AZURE_FEDERATED_TOKEN_FILE), managed
    # identity, Azure CLI/PowerShell/azd; never a browser window in CI.
    default = DefaultAzureCredential(exclude_interactive_browser_credential=True, **identity_options)
    # In a GitHub runner with `id-token: write` or an Azure Pipelines step with a workload-identity
    # service connection, each new token is bought with a fresh CI ID token first (a long `dtrain wait`
    # outlives an hour-long CLI session); when that exchange fails, the chain goes on (docs/ci.md).
    ci = ci_credentials(**identity_options)
    return ChainedTokenCredential(*ci, default) if ci else default


# --- quiet SDK -------------------------------------------------------------------------------------

_QUIET_DONE = False
_NOISY = ("azure", "msal", "msrest", "urllib3", "opencensus", "opentelemetry", "marshmallow")


def quiet() -> None:
    """Keep the SDK's experimental warnings, log records and progress bars out of dtrain's output."""
    global _QUIET_DONE
    if not _QUIET_DONE:
        _QUIET_DONE = True
        for mod in _NOISY:
            warnings.filterwarnings("ignore", module=mod)
        warnings.filterwarnings("ignore", message=r".*experimental.*")
        os.environ.setdefault("AZUREML_LOG_LEVEL", "ERROR")
        import azure.ai.ml  # noqa: F401  its __init__ gives its loggers INFO and a stderr handler
    silence_loggers()


def silence_loggers() -> None:
    """ERROR level for every SDK logger (modules imported later set INFO again: called before each use)."""
    for name in list(logging.root.manager.loggerDict):
        if name.split(".", 1)[0] in _NOISY:
            logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def muted_stderr(passthrough):
    """The SDK prints colour resets and blank lines straight to sys.stderr around code uploads: hold
    stderr while it works and hand only real text to passthrough(text), once stderr is back."""
    buf = io.StringIO()
    real = sys.stderr
    sys.stderr = buf
    try:
        yield
    finally:
        sys.stderr = real
        text = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())
        kept = [line for line in text.splitlines() if line.strip() and not line.startswith("Uploading ")]
        if kept:
            passthrough("\n".join(kept))


def _loopback_policy_class():
    from azure.core.pipeline.policies import HeadersPolicy
    from urllib3.util import parse_url

    class LoopbackHttpPolicy(HeadersPolicy):
        """Lets azure-core's bearer-token policy use plain http, only towards a loopback host.

        MLClient hands headers_policy to every service client it builds, before the authentication
        policy; setting enforce_https=False here is the one client-wide switch (MLClient itself passes
        it only on some calls). Any other host keeps https enforced."""

        def on_request(self, request):
            # read the URL as urllib3 (the connection) does, not as urllib.parse does
            url = request.http_request.url
            parts = parse_url(url)
            if parts.scheme == "http" and parts.auth is None and "\\" not in url and is_loopback_host(parts.host):
                request.context["enforce_https"] = False
            super().on_request(request)

    return LoopbackHttpPolicy


def make_ml_client(workspace, endpoint: Endpoint, credential=None):
    quiet()
    from azure.ai.ml import MLClient

    kwargs = dict(endpoint.mlclient_kwargs())
    if endpoint.loopback:
        kwargs["headers_policy"] = _loopback_policy_class()()
    # show_progress=True is the SDK path that raises a failed code upload instead of waiting forever
    # for it (upload_guard.py); the progress bar itself is dropped by muted_stderr
    kwargs.update(show_progress=True, enable_telemetry=False,
                  retry_total=int(settings().number(ENV_RETRY_TOTAL)),
                  retry_backoff_factor=settings().number(ENV_RETRY_BACKOFF), retry_backoff_max=30)
    return MLClient(credential or make_credential(endpoint), subscription_id=workspace.subscription_id,
                    resource_group_name=workspace.resource_group, workspace_name=workspace.workspace_name,
                    **kwargs)
