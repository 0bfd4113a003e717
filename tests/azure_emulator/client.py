"""Build a real ``azure.ai.ml.MLClient`` whose HTTP pipeline talks to the emulator."""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any, Iterable, List, Optional, Union

from urllib.parse import urlsplit

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
    """A TokenCredential handing out fixed bearer tokens (no Azure AD).

    ``tokens`` may be one token or a sequence: each *fresh* request for a token (the SDK asks again
    after a 401 challenge, or when the cached one is near expiry) hands out the next one, the last
    being reused.  Implements both ``get_token`` and ``get_token_info`` (azure-core >= 1.31 prefers
    the latter).
    """

    def __init__(self, tokens: Union[str, Iterable[str], None] = None, expires_in: int = 3600) -> None:
        if tokens is None:
            tokens = fake_jwt(expires_in=expires_in)
        self._tokens: List[str] = [tokens] if isinstance(tokens, str) else list(tokens)
        if not self._tokens:
            raise ValueError("at least one token is needed")
        self._next = 0
        self._lock = threading.Lock()
        self.expires_in = expires_in
        self.requests: List[dict] = []  # (scopes, claims) of each token request

    def _take(self, scopes: tuple, claims: Optional[str]) -> str:
        with self._lock:
            self.requests.append({"scopes": scopes, "claims": claims})
            token = self._tokens[min(self._next, len(self._tokens) - 1)]
            self._next += 1
            return token

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
        url = urlsplit(request.http_request.url)
        if url.scheme == "http" and (url.hostname or "") in _LOOPBACK_HOSTS:
            request.context["enforce_https"] = False
        super().on_request(request)


def cloud_kwargs(endpoint: str, cloud_name: Optional[str] = None) -> dict:
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
            "storage_endpoint": "core.windows.net",
            "registry_discovery_endpoint": endpoint + "/",
        },
    }


def make_ml_client(emu: Any, token: Union[str, Iterable[str], Any, None] = None, **kwargs: Any):
    """A real MLClient for the emulator's workspace.  ``token`` is a token string, a list of tokens
    (see :class:`StaticTokenCredential`), a credential object, or None for an unsigned fake JWT.  Extra kwargs go to MLClient
    (e.g. ``retry_total=3``)."""
    from azure.ai.ml import MLClient

    credential = token if hasattr(token, "get_token") else StaticTokenCredential(token)
    options = dict(cloud_kwargs(emu.url))
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
