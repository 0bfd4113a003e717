"""Build a real ``azure.ai.ml.MLClient`` whose HTTP pipeline talks to the emulator."""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any, List, Optional, Union

from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import HeadersPolicy


def fake_jwt(audience: str = "https://management.azure.com/", tenant_id: str = "00000000-0000-0000-0000-0000000000aa",
             expires_in: int = 3600, **claims: Any) -> str:
    """An unsigned JWT (``alg: none``) with ``aud``/``tid``/``exp`` claims: the SDK decodes tokens
    without verifying them (to append the tenant to studio URLs), the emulator never checks them."""

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()

    now = int(time.time())
    payload = {"aud": audience, "tid": tenant_id, "iat": now, "nbf": now, "exp": now + expires_in,
               "oid": "00000000-0000-0000-0000-0000000000bb", "name": "dtrain emulator"}
    payload.update(claims)
    return part({"alg": "none", "typ": "JWT"}) + "." + part(payload) + ".c2ln"


class StaticTokenCredential:
    """A TokenCredential handing out a bearer token without Azure AD.

    ``token=None`` (default) mints a fresh unsigned fake JWT per request whose ``aud`` is the
    requested scope without ``/.default``; a string is handed out as is.  :meth:`rotate` changes
    the token handed out from then on: azure-core caches a token per service client and only asks
    again when it nears expiry or after a 401 challenge, so ``rotate`` + ``emu.expire_token(old)``
    exercises the refresh path.  Implements ``get_token`` and ``get_token_info`` (azure-core >= 1.31
    prefers the latter).  ``requests`` lists each token request's scopes and claims.
    """

    def __init__(self, token: Optional[str] = None, expires_in: int = 3600) -> None:
        self.token = token
        self.expires_in = expires_in
        self._lock = threading.Lock()
        self._minted = 0
        self.requests: List[dict] = []

    def rotate(self, token: Optional[str]) -> None:
        with self._lock:
            self.token = token

    def _take(self, scopes: tuple, claims: Optional[str]) -> str:
        with self._lock:
            self.requests.append({"scopes": scopes, "claims": claims})
            if self.token is not None:
                return self.token
            self._minted += 1
            scope = scopes[0] if scopes else ""
            audience = scope[: -len("/.default")] if scope.endswith("/.default") else scope
            return fake_jwt(audience=audience or "https://management.azure.com/", expires_in=self.expires_in,
                            jti=str(self._minted))

    def get_token(self, *scopes: str, claims: Optional[str] = None, tenant_id: Optional[str] = None,
                  enable_cae: bool = False, **kwargs: Any) -> AccessToken:
        return AccessToken(self._take(scopes, claims), int(time.time()) + self.expires_in)

    def get_token_info(self, *scopes: str, options: Optional[dict] = None) -> AccessTokenInfo:
        claims = (options or {}).get("claims")
        return AccessTokenInfo(self._take(scopes, claims), int(time.time()) + self.expires_in)

    def close(self) -> None:
        pass


_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class AllowHttpOnLoopbackPolicy(HeadersPolicy):
    """A HeadersPolicy that also lets azure-core's bearer-token policy send tokens over plain http,
    but only to a loopback host.

    BearerTokenCredentialPolicy refuses non-https URLs unless the request context says
    ``enforce_https=False``.  MLClient only passes that option on some calls (its operations get
    ``enforce_https=False`` when the base URL is http, but e.g. the code-version hash lookup and
    the run-history client do not), so a client-wide knob is needed.  Every azure-ai-ml service
    client builds its pipeline from the same keyword arguments, with the headers policy placed
    before the authentication policy, so passing ``headers_policy=AllowHttpOnLoopbackPolicy()`` to
    MLClient reaches all of them.  It is a SansIO policy, so one instance can be shared safely.
    """

    def on_request(self, request: PipelineRequest) -> None:
        # read the URL as urllib3 (which makes the connection) does: urllib.parse would take
        # "http://evil.example.com\\@127.0.0.1" for 127.0.0.1
        from urllib3.util import parse_url

        raw = request.http_request.url
        url = parse_url(raw)
        if url.scheme == "http" and url.auth is None and "\\" not in raw and (url.host or "") in _LOOPBACK_HOSTS:
            request.context["enforce_https"] = False
        super().on_request(request)


def cloud_kwargs(endpoint: str, cloud_name: Optional[str] = None, storage_suffix: str = "core.windows.net") -> dict:
    """The MLClient keyword arguments that point it at a custom resource-manager ``endpoint``.

    MLClient(cloud=<name>, cloud_metadata={...}) registers a custom cloud whose resource_manager
    endpoint becomes the base URL of every ARM service client (``_add_cloud_to_environments``; the
    name must be new to the process, so it is derived from the endpoint).  Because that base URL is
    ``http://``, MLClient passes ``enforce_https=False`` to its operations, which hand it on per call
    to azure-core's BearerTokenCredentialPolicy.
    """
    endpoint = endpoint.rstrip("/")
    name = cloud_name or "Emulator_" + endpoint.split("://", 1)[-1].replace(".", "_").replace(":", "_")
    return {
        "cloud": name,
        "cloud_metadata": {
            "azure_portal": endpoint + "/portal/",
            "resource_manager": endpoint + "/",
            "active_directory": endpoint + "/login/",
            "aml_resource_id": endpoint + "/",
            "storage_endpoint": storage_suffix,
            "registry_discovery_endpoint": endpoint + "/",
        },
    }


def make_ml_client(emu: Any, token: Union[str, Any, None] = None, **kwargs: Any):
    """A real MLClient for the emulator's workspace.  ``token`` is a token string, a credential
    object, or None for fake JWTs (see :class:`StaticTokenCredential`).  Extra kwargs go to MLClient
    (e.g. ``retry_total=3``)."""
    from azure.ai.ml import MLClient

    credential = token if hasattr(token, "get_token") else StaticTokenCredential(token)
    options = dict(cloud_kwargs(emu.url, storage_suffix=emu.storage_suffix))
    options["headers_policy"] = AllowHttpOnLoopbackPolicy()
    options.setdefault("show_progress", False)
    options.setdefault("enable_telemetry", False)
    options.update(kwargs)
    return MLClient(
        credential,
        subscription_id=emu.subscription_id,
        resource_group_name=emu.resource_group,
        workspace_name=emu.workspace,
        **options,
    )
