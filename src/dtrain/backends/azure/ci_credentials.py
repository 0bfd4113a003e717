"""CI credentials put ahead of DefaultAzureCredential: GitHub OIDC and Azure Pipelines service connections
(workload identity federation). Each buys Azure tokens with a fresh CI-issued ID token, so a long wait
never outlives its token.

Either can fail where the other credentials would work: a runner grants `id-token: write` but the app
registration has no federated credential for it, while AZURE_CLIENT_SECRET is set. azure-identity's
ChainedTokenCredential moves on only after CredentialUnavailableError and stops at any other error,
so each CI credential is wrapped to turn its failure into "unavailable" (FallThrough). Imported only
when an Azure command authenticates.
"""
from __future__ import annotations

import os

from . import github_oidc

# Set by the AzureCLI@2 / AzurePowerShell@5 tasks (and others with a service connection input) for a
# service connection that uses workload identity federation.
PIPELINES_CONNECTION = "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID"
PIPELINES_CLIENT = ("AZURESUBSCRIPTION_CLIENT_ID", "AZURE_CLIENT_ID")
PIPELINES_TENANT = ("AZURESUBSCRIPTION_TENANT_ID", "AZURE_TENANT_ID")
# Set by Azure Pipelines in every job (System.OidcRequestUri); System.AccessToken reaches a step's
# environment only when mapped: `env: {SYSTEM_ACCESSTOKEN: $(System.AccessToken)}`.
PIPELINES_OIDC_URI = "SYSTEM_OIDCREQUESTURI"
PIPELINES_ACCESS_TOKEN = "SYSTEM_ACCESSTOKEN"


class FallThrough:
    """A credential whose failure lets a ChainedTokenCredential try the next one."""

    def __init__(self, credential, what: str):
        self.credential, self.what = credential, what

    def _unavailable(self, exc: Exception):
        from azure.identity import CredentialUnavailableError

        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return CredentialUnavailableError(message=f"{self.what} failed ({first}); trying the next credential")

    def get_token(self, *scopes, **kwargs):
        from azure.identity import CredentialUnavailableError

        try:
            return self.credential.get_token(*scopes, **kwargs)
        except CredentialUnavailableError:
            raise
        except Exception as exc:  # a refused exchange, an unreachable CI endpoint: not ours to end the chain
            raise self._unavailable(exc) from exc

    def get_token_info(self, *scopes, options=None):
        from azure.identity import CredentialUnavailableError

        try:
            return self.credential.get_token_info(*scopes, options=options)
        except CredentialUnavailableError:
            raise
        except Exception as exc:
            raise self._unavailable(exc) from exc

    def close(self) -> None:
        self.credential.close()

    def __enter__(self):
        self.credential.__enter__()
        return self

    def __exit__(self, *args):
        self.credential.__exit__(*args)

    def __repr__(self) -> str:
        return f"FallThrough({type(self.credential).__name__})"


def _first(names, env) -> str | None:
    return next((env[n] for n in names if env.get(n)), None)


def azure_pipelines(environ=None, **options):
    """azure-identity's AzurePipelinesCredential for the step's service connection, or None outside
    such a step."""
    env = os.environ if environ is None else environ
    connection, token = env.get(PIPELINES_CONNECTION), env.get(PIPELINES_ACCESS_TOKEN)
    client, tenant = _first(PIPELINES_CLIENT, env), _first(PIPELINES_TENANT, env)
    if not (env.get(PIPELINES_OIDC_URI) and connection and token and client and tenant):
        return None
    from azure.identity import AzurePipelinesCredential

    return AzurePipelinesCredential(tenant_id=tenant, client_id=client, service_connection_id=connection,
                                    system_access_token=token, **options)


def ci_credentials(**options) -> list:
    """The CI credentials this process can use, each wrapped to fall through on failure."""
    out = []
    gh = github_oidc.credential(**options)
    if gh is not None:
        out.append(FallThrough(gh, "GitHub OIDC (federated credential exchange)"))
    ap = azure_pipelines(**options)
    if ap is not None:
        out.append(FallThrough(ap, "Azure Pipelines service connection (workload identity)"))
    return out
