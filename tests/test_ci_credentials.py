"""dtrain's real credential chain (azure-identity's ChainedTokenCredential, DefaultAzureCredential, MSAL)
against local fakes of Entra ID's token endpoint, the GitHub runner's ID-token endpoint and Azure
Pipelines' OIDC endpoint. A refused federated exchange must fall through to the client secret; an
Azure Pipelines service connection is used through AzurePipelinesCredential."""
from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from azure.core.pipeline.transport import RequestsTransport

from dtrain.backends.azure.client import endpoint_from_env, make_credential

TENANT = "00000000-0000-0000-0000-0000000000aa"
CLIENT = "00000000-0000-0000-0000-0000000000bb"
SECRET = "the-client-secret"
SCOPE = "https://management.azure.com/.default"
ENTRA = "login.microsoftonline.com"
_CI_VARS = ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
            "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME",
            "SYSTEM_OIDCREQUESTURI", "SYSTEM_ACCESSTOKEN", "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID",
            "AZURESUBSCRIPTION_CLIENT_ID", "AZURESUBSCRIPTION_TENANT_ID", "DTRAIN_ARM_TOKEN", "DTRAIN_ARM_ENDPOINT",
            "AZURE_AUTHORITY_HOST", "IDENTITY_ENDPOINT", "MSI_ENDPOINT")


class Fakes:
    """One local http server playing Entra ID (tenant discovery + token), the GitHub runner and Azure
    Pipelines. `federated_ok` says whether Entra accepts a client assertion."""

    def __init__(self):
        self.federated_ok = False
        self.token_requests: list[dict] = []     # form fields of each token request
        self.gh_requests: list[str] = []
        self.ado_requests: list[tuple[str, str]] = []
        fakes = self

        class H(BaseHTTPRequestHandler):
            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith("/github/"):
                    fakes.gh_requests.append(self.path)
                    return self._send(200, {"value": f"gh-id-token-{len(fakes.gh_requests)}"})
                if self.path.endswith("/v2.0/.well-known/openid-configuration"):
                    base = f"https://{ENTRA}/{TENANT}"
                    return self._send(200, {"token_endpoint": f"{base}/oauth2/v2.0/token",
                                            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                                            "issuer": f"{base}/v2.0"})
                self._send(404, {"error": "not_found"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if self.path.startswith("/ado/"):
                    fakes.ado_requests.append((self.path, self.headers.get("Authorization")))
                    return self._send(200, {"oidcToken": "ado-id-token"})
                form = dict(urllib.parse.parse_qsl(body))
                fakes.token_requests.append(form)
                if "client_assertion" in form:
                    if fakes.federated_ok:
                        return self._send(200, {"token_type": "Bearer", "expires_in": 3600,
                                                "access_token": "token-from-federation"})
                    return self._send(400, {"error": "invalid_client", "error_codes": [70021],
                                            "error_description": "AADSTS70021: No matching federated identity "
                                                                 "record found for presented assertion."})
                if form.get("client_secret") == SECRET:
                    return self._send(200, {"token_type": "Bearer", "expires_in": 3600,
                                            "access_token": "token-from-secret"})
                self._send(401, {"error": "invalid_client", "error_description": "AADSTS7000215: bad secret"})

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        # a short poll interval: shutdown() waits for the next poll (0.5 s by default, at every teardown)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def transport(self) -> RequestsTransport:
        """azure-core's own requests transport, with https://login.microsoftonline.com sent to this server."""
        local = self.url

        class ToLocal(requests.adapters.HTTPAdapter):
            def send(self, request, **kw):
                request.url = local + request.url.split(ENTRA, 1)[1]
                return super().send(request, **kw)

        s = requests.Session()
        s.mount(f"https://{ENTRA}/", ToLocal())
        return RequestsTransport(session=s, session_owner=False)

    def close(self):
        self.server.shutdown()


@pytest.fixture
def fakes(monkeypatch):
    for k in _CI_VARS:
        monkeypatch.delenv(k, raising=False)
    f = Fakes()
    yield f
    f.close()


def github_runner(monkeypatch, fakes):
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", fakes.url + "/github/token")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "runner-token")
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT)
    monkeypatch.setenv("AZURE_TENANT_ID", TENANT)


def pipelines_step(monkeypatch, fakes):
    monkeypatch.setenv("SYSTEM_OIDCREQUESTURI", fakes.url + "/ado/oidctoken")
    monkeypatch.setenv("SYSTEM_ACCESSTOKEN", "system-access-token")
    monkeypatch.setenv("AZURESUBSCRIPTION_SERVICE_CONNECTION_ID", "connection-123")
    monkeypatch.setenv("AZURESUBSCRIPTION_CLIENT_ID", CLIENT)
    monkeypatch.setenv("AZURESUBSCRIPTION_TENANT_ID", TENANT)


def chain(fakes):
    return make_credential(endpoint_from_env({}), transport=fakes.transport())


def test_refused_github_exchange_falls_through_to_the_client_secret(monkeypatch, fakes):
    github_runner(monkeypatch, fakes)
    monkeypatch.setenv("AZURE_CLIENT_SECRET", SECRET)
    cred = chain(fakes)
    assert cred.get_token(SCOPE).token == "token-from-secret"
    assert cred.get_token_info(SCOPE).token == "token-from-secret"
    # the federated exchange was really tried first, with the runner's ID token, and refused
    assert fakes.gh_requests and fakes.token_requests[0]["client_assertion"] == "gh-id-token-1"
    assert any(r.get("client_secret") == SECRET for r in fakes.token_requests)


def test_accepted_github_exchange_is_used_first(monkeypatch, fakes):
    github_runner(monkeypatch, fakes)
    monkeypatch.setenv("AZURE_CLIENT_SECRET", SECRET)
    fakes.federated_ok = True
    assert chain(fakes).get_token(SCOPE).token == "token-from-federation"
    assert not any("client_secret" in r for r in fakes.token_requests)


def test_every_credential_failing_still_fails_with_each_reason(monkeypatch, fakes):
    from azure.core.exceptions import ClientAuthenticationError

    github_runner(monkeypatch, fakes)
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "wrong-secret")
    monkeypatch.setenv("AZURE_CONFIG_DIR", "/nonexistent-az-config")
    monkeypatch.setenv("PATH", "/nonexistent")          # no az, azd or pwsh to ask
    with pytest.raises(ClientAuthenticationError) as e:
        chain(fakes).get_token(SCOPE)
    assert "AADSTS70021" in str(e.value) and "wrong-secret" not in str(e.value)


def test_azure_pipelines_service_connection(monkeypatch, fakes):
    pipelines_step(monkeypatch, fakes)
    fakes.federated_ok = True
    from azure.identity import AzurePipelinesCredential

    cred = chain(fakes)
    assert isinstance(cred.credentials[0].credential, AzurePipelinesCredential)
    assert cred.get_token(SCOPE).token == "token-from-federation"
    path, auth = fakes.ado_requests[0]
    assert "serviceConnectionId=connection-123" in path and auth == "Bearer system-access-token"
    assert fakes.token_requests[0]["client_assertion"] == "ado-id-token"
    assert fakes.token_requests[0]["client_id"] == CLIENT


def test_refused_pipelines_exchange_falls_through_to_the_client_secret(monkeypatch, fakes):
    pipelines_step(monkeypatch, fakes)
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT)
    monkeypatch.setenv("AZURE_TENANT_ID", TENANT)
    monkeypatch.setenv("AZURE_CLIENT_SECRET", SECRET)
    assert chain(fakes).get_token(SCOPE).token == "token-from-secret"
    assert fakes.ado_requests and fakes.token_requests[0]["client_assertion"] == "ado-id-token"


def test_pipelines_credential_only_with_a_service_connection(monkeypatch, fakes):
    from dtrain.backends.azure.ci_credentials import azure_pipelines

    monkeypatch.setenv("SYSTEM_OIDCREQUESTURI", fakes.url + "/ado/oidctoken")   # set in every pipeline job
    monkeypatch.setenv("AZURE_CLIENT_ID", CLIENT)
    monkeypatch.setenv("AZURE_TENANT_ID", TENANT)
    assert azure_pipelines() is None                      # no service connection, no access token
    monkeypatch.setenv("AZURESUBSCRIPTION_SERVICE_CONNECTION_ID", "c")
    assert azure_pipelines() is None                      # System.AccessToken not mapped into the step
    monkeypatch.setenv("SYSTEM_ACCESSTOKEN", "t")
    assert azure_pipelines() is not None
