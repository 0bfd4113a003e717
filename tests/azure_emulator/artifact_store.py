"""The workspace's artifact datastore, where a job's `default` output and (for jobs.stream) its logs live.

Modes (`emu.artifacts.mode`):
- "logFiles" (the default): the run details' logFiles list every rank's user log, signed by the service;
- "datastore": logFiles lists no user logs (only a system log), and the logs are found as azure-ai-ml's
  jobs.stream finds them: datastore `workspaceartifactstore` (GET; listSecrets answers an account SAS, as
  recorded for an expirable secret, or with `key_secrets` the account key), then a listing of
  `ExperimentRun/dcid.NAME/user_logs/` on its container `azureml`, path-style;
- "refused": as "datastore", but the storage account has shared-key access turned off: a request signed
  with the account key (SharedKey, or the account SAS: any SAS but the service's own in logFiles) is
  answered 403 KeyBasedAuthenticationNotPermitted.

`image_builds`: names of jobs whose environment image is built while they are Preparing; until they leave
NotStarted/Starting/Preparing, logFiles lists only `azureml-logs/20_image_build_log.txt` (the Docker build log
Azure ML writes when an environment changed; azureml-cheatsheets' debugging page lists it).

Shapes: the datastore as the recorded datastore list answers workspaceartifactstore (test_blob_store.json:
AzureBlob, container `azureml`, credentialsType AccountKey, serviceDataAccessAuthIdentity None); listSecrets
as datastores.py answers it; the 403 as the Blob service's error XML with x-ms-error-code.
"""
from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any, Dict
from urllib.parse import unquote

from .datastores import ACCOUNT_SAS, ARTIFACT_DATASTORE

if TYPE_CHECKING:  # pragma: no cover
    from .server import AzureMLEmulator
    from .wire import Blob, JobState

ACCOUNT_KEY = base64.b64encode(b"dtrain-emulator-account-key-0123").decode("ascii")
SYSTEM_LOG = "system_logs/lifecycler/execution-wrapper.txt"
IMAGE_BUILD_LOG = "azureml-logs/20_image_build_log.txt"   # Azure ML's Docker build log of a job's environment
MODES = ("logFiles", "datastore", "refused")


class ArtifactStore:
    def __init__(self, emu: "AzureMLEmulator") -> None:
        self.emu = emu
        self.mode = "logFiles"          # one of MODES
        self.key_secrets = False        # listSecrets answers the account key even for an expirable secret
        self.image_builds: set = set()  # jobs whose environment image builds while they are Preparing

    # -- ARM: datastores/workspaceartifactstore[/listSecrets] ------------------------------------------
    def resource(self) -> Dict[str, Any]:
        from .wire import _PROVIDER, ARTIFACT_CONTAINER, _system_data

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

    def secrets(self, expirable: bool) -> Dict[str, Any]:
        """listSecrets: an account SAS for an expirable secret (as recorded for every datastore), else the key."""
        if expirable and not self.key_secrets:
            return {"secretsType": "Sas", "sasToken": "?" + ACCOUNT_SAS}
        return {"secretsType": "AccountKey", "key": ACCOUNT_KEY}

    # -- run history: what logFiles lists ----------------------------------------------------------------
    def log_files(self, state: "JobState", status: str = "Running") -> Dict[str, str]:
        emu = self.emu
        if state.name in self.image_builds and status in ("NotStarted", "Starting", "Preparing"):
            return {IMAGE_BUILD_LOG: emu._log_url(state, IMAGE_BUILD_LOG)}     # the build is all there is yet
        if self.mode == "logFiles":
            return {n: emu._log_url(state, n) for n in emu._log_names(state)}
        return {SYSTEM_LOG: emu._log_url(state, SYSTEM_LOG)}

    # -- storage: access and the listing of log blobs -------------------------------------------------------
    def check_access(self, container: str, query: Dict[str, str], headers: Dict[str, str]) -> None:
        """403 for key-signed requests to the artifact container when shared-key access is off."""
        from .wire import ARTIFACT_CONTAINER, SAS_QUERY, HTTPError

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
        from .wire import ARTIFACT_CONTAINER, Blob

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
