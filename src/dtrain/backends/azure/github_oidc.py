"""GitHub Actions OIDC as a credential that renews itself.

`azure/login` with OIDC leaves an Azure CLI session whose access token lasts about an hour; a
`dtrain wait` on a long training job outlives it. Here each new Azure token is bought with a fresh
GitHub ID token (requested from the runner's ACTIONS_ID_TOKEN_REQUEST_URL), so a wait can last as long
as the job. Used only when the runner grants `id-token: write` and AZURE_CLIENT_ID/AZURE_TENANT_ID
name a federated app registration; when the exchange is refused, the chain goes on to the other
credentials (ci_credentials.py). Imported by the Azure backend only.
"""
from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request

AUDIENCE = "api://AzureADTokenExchange"


def available() -> bool:
    return all(os.environ.get(k) for k in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
                                           "AZURE_CLIENT_ID", "AZURE_TENANT_ID"))


def github_id_token(timeout: float = 30.0) -> str:
    url = os.environ["ACTIONS_ID_TOKEN_REQUEST_URL"]
    sep = "&" if "?" in url else "?"
    req = urllib.request.Request(f"{url}{sep}audience={urllib.parse.quote(AUDIENCE)}",
                                 headers={"Authorization": f"bearer {os.environ['ACTIONS_ID_TOKEN_REQUEST_TOKEN']}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the runner's own endpoint
        return json.load(resp)["value"]


def credential(**options):
    """A ClientAssertionCredential fed by GitHub ID tokens, or None when not in such a runner.
    options go to azure-identity (e.g. transport)."""
    if not available():
        return None
    from azure.identity import ClientAssertionCredential

    return ClientAssertionCredential(tenant_id=os.environ["AZURE_TENANT_ID"],
                                     client_id=os.environ["AZURE_CLIENT_ID"], func=github_id_token, **options)
