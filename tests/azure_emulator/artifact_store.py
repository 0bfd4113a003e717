"""The workspace's artifact datastore, where a job's `default` output and (for jobs.stream) its logs live.

Modes (`emu.artifacts.mode`):
- "logFiles" (the default): the run details' logFiles list every rank's user log, signed by the service;
- "datastore": logFiles lists no user logs (only a system log), and the logs are found as azure-ai-ml's
  jobs.stream finds them: datastore `workspaceartifactstore` (GET; listSecrets answers its account key),
  then a listing of `ExperimentRun/dcid.NAME/user_logs/` on its container `azureml`, path-style;
- "refused": as "datastore", but the storage account has shared-key access turned off: a request signed
  with the account key (SharedKey, or a SAS not issued by the service) is answered 403
  KeyBasedAuthenticationNotPermitted.

Shapes: the datastore as the recorded datastore list answers workspaceartifactstore (test_blob_store.json:
AzureBlob, container `azureml`, credentialsType AccountKey, serviceDataAccessAuthIdentity None); listSecrets
as the REST spec's AccountKeyDatastoreSecrets (the recording shows the Sas kind for another datastore);
the 403 as the Blob service's error XML with x-ms-error-code.
"""
from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any, Dict, List, Tuple
from urllib.parse import unquote

if TYPE_CHECKING:  # pragma: no cover
    from .server import AzureMLEmulator, Blob, JobState

ARTIFACT_DATASTORE = "workspaceartifactstore"
ACCOUNT_KEY = base64.b64encode(b"dtrain-emulator-account-key-0123").decode("ascii")
SYSTEM_LOG = "system_logs/lifecycler/execution-wrapper.txt"
MODES = ("logFiles", "datastore", "refused")


class ArtifactStore:
    def __init__(self, emu: "AzureMLEmulator") -> None:
        self.emu = emu
        self.mode = "logFiles"          # one of MODES

    # -- ARM: datastores/workspaceartifactstore[/listSecrets] ------------------------------------------
    def resource(self) -> Dict[str, Any]:
        from .server import _PROVIDER, ARTIFACT_CONTAINER, _system_data

        emu = self.emu
        return {
            "id": emu.arm_id("datastores", ARTIFACT_DATASTORE),
            "name": ARTIFACT_DATASTORE,
            "type": f"{_PROVIDER}/workspaces/datastores",
            "properties": {
                "description": None, "tags": None, "properties": None, "isDefault": False,
                "credentials": {"credentialsType": "AccountKey"},
                "subscriptionId": None, "resourceGroup": None,
                "datastoreType": "AzureBlob", "accountName": emu.storage_account,
                "containerName": ARTIFACT_CONTAINER, "endpoint": emu.storage_suffix, "protocol": "https",
                "serviceDataAccessAuthIdentity": "None",
            },
            "systemData": _system_data(),
        }

    def datastore_call(self, method: str, parts: List[str]) -> Tuple[int, Dict[str, str], bytes]:
        from .server import HTTPError, _json

        if len(parts) == 2 and method == "GET":
            return _json(200, self.resource())
        if len(parts) == 3 and parts[2] == "listSecrets" and method == "POST":
            return _json(200, {"secretsType": "AccountKey", "key": ACCOUNT_KEY})
        raise HTTPError(404, "NotFound", f"The emulator has no route for {method} datastores/{'/'.join(parts[1:])}")

    # -- run history: what logFiles lists ----------------------------------------------------------------
    def log_files(self, state: "JobState") -> Dict[str, str]:
        emu = self.emu
        if self.mode == "logFiles":
            return {n: emu._log_url(state, n) for n in emu._log_names(state)}
        return {SYSTEM_LOG: emu._log_url(state, SYSTEM_LOG)}

    # -- storage: access and the listing of log blobs -------------------------------------------------------
    def check_access(self, container: str, query: Dict[str, str], headers: Dict[str, str]) -> None:
        """403 for key-signed requests to the artifact container when shared-key access is off."""
        from .server import ARTIFACT_CONTAINER, SAS_QUERY, HTTPError

        if self.mode != "refused" or container != ARTIFACT_CONTAINER:
            return
        service_sig = unquote(SAS_QUERY.rsplit("sig=", 1)[1])    # what logFiles' URLs carry
        if headers.get("authorization") is not None or query.get("sig", service_sig) != service_sig:
            raise HTTPError(403, "KeyBasedAuthenticationNotPermitted",
                            "Key based authentication is not permitted on this storage account.",
                            {"x-ms-error-code": "KeyBasedAuthenticationNotPermitted"})

    def listed(self, container: str, prefix: str) -> Dict[str, "Blob"]:
        """The user logs of every job under the prefix, as blobs (in "datastore" mode only: in "logFiles" mode
        the service keeps them elsewhere, which is why logFiles is all there is)."""
        from .server import ARTIFACT_CONTAINER, Blob

        emu = self.emu
        if self.mode == "logFiles" or container != ARTIFACT_CONTAINER:
            return {}
        out: Dict[str, Blob] = {}
        for name, state in list(emu._jobs.items()):
            for log in emu._log_names(state):
                blob = f"ExperimentRun/dcid.{name}/{log}"
                if blob.startswith(prefix):
                    out[blob] = Blob(emu._log_text(state, log).encode("utf-8"), "text/plain; charset=utf-8", {},
                                     state.created or time.time())
        return out
