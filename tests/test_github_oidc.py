"""The GitHub OIDC credential asks the runner for a fresh ID token (with the Entra ID audience) every
time one is needed; outside such a runner it stays out of the way."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dtrain.backends.azure import github_oidc

RUNNER_TOKEN = "runner-request-token"


def _runner():
    seen = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"value": f"gh-id-token-{len(seen)}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def test_each_call_gets_a_fresh_github_token(monkeypatch):
    srv, seen = _runner()
    try:
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", f"http://127.0.0.1:{srv.server_port}/token?x=1")
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", RUNNER_TOKEN)
        assert github_oidc.github_id_token() == "gh-id-token-1"
        assert github_oidc.github_id_token() == "gh-id-token-2"
        path, auth = seen[0]
        assert path == "/token?x=1&audience=api%3A//AzureADTokenExchange"
        assert auth == f"bearer {RUNNER_TOKEN}"
    finally:
        srv.shutdown()


def test_used_only_in_a_runner_with_an_app_registration(monkeypatch):
    for k in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "AZURE_CLIENT_ID", "AZURE_TENANT_ID"):
        monkeypatch.delenv(k, raising=False)
    assert github_oidc.credential() is None
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "http://127.0.0.1:9/token")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", RUNNER_TOKEN)
    assert github_oidc.credential() is None          # no app registration named
    monkeypatch.setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
    monkeypatch.setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
    cred = github_oidc.credential()
    from azure.identity import ClientAssertionCredential
    assert isinstance(cred, ClientAssertionCredential)


def test_the_azure_backend_puts_it_first(monkeypatch):
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "http://127.0.0.1:9/token")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", RUNNER_TOKEN)
    monkeypatch.setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
    monkeypatch.setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
    from azure.identity import ChainedTokenCredential, ClientAssertionCredential

    from dtrain.backends.azure.ci_credentials import FallThrough
    from dtrain.backends.azure.client import endpoint_from_env, make_credential
    cred = make_credential(endpoint_from_env({}))
    assert isinstance(cred, ChainedTokenCredential)
    assert isinstance(cred.credentials[0], FallThrough)
    assert isinstance(cred.credentials[0].credential, ClientAssertionCredential)
