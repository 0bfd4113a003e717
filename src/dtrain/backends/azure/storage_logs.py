"""A job's logs on its datastore: the second place azure-ai-ml reads them.

`jobs.stream` (what `az ml job stream` runs) does not read the run details' `logFiles` when the job has a
`default` output, the uri_folder the service adds to every job
(`azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.NAME`): it resolves that datastore
(get_datastore_info: the datastore GET, then listSecrets for the key it signs with) and lists
`PREFIX/user_logs/` and the legacy `PREFIX/azureml-logs/` on the storage account itself
(list_logs_in_datastore), each blob given a read SAS signed with the account key. dtrain reads `logFiles`
first (signed by the service, no storage role needed) and, where it holds no user logs, lists the datastore
the same way: the answer has logFiles' shape (name under PREFIX -> signed URL), so the ranged reads of
logs.py serve both.

A storage account that refuses the listing (403, e.g. KeyBasedAuthenticationNotPermitted when shared-key
access is turned off) raises StorageRefused; the caller decides what to say (logs.py's follower must not
follow nothing in silence). azure-storage-blob is imported here only, when a listing is needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import List, Optional, Tuple
from urllib.parse import quote

from .storage_endpoint import account_url

LOG_FOLDERS = ("user_logs/", "azureml-logs/")
SAS_LIFETIME = timedelta(minutes=30)        # as the SDK's list_logs_in_datastore signs them


class StorageRefused(Exception):
    """The datastore's storage account refused a request (403)."""

    def __init__(self, datastore: str, account: str, code: str | None):
        super().__init__(f"{account}: {code or 'AuthorizationFailure'}")
        self.datastore, self.account, self.code = datastore, account, code


@dataclass(frozen=True)
class DatastoreFolder:
    """A folder on a datastore and what reaches it: the account key or a SAS token from listSecrets."""
    datastore: str
    account: str
    container: str
    prefix: str             # the folder inside the container, without slashes at either end
    url: str                # the account's blob service URL
    key: str | None = None
    sas: str | None = None

    def blob_url(self, blob: str) -> str:
        """The blob's URL with a read SAS: signed with the account key (the SDK's generate_blob_sas), or the
        datastore's own SAS token."""
        base = f"{self.url}/{quote(self.container)}/{quote(blob)}"
        if self.key:
            from azure.storage.blob import BlobSasPermissions, generate_blob_sas

            token = generate_blob_sas(account_name=self.account, container_name=self.container, blob_name=blob,
                                      account_key=self.key, permission=BlobSasPermissions(read=True),
                                      expiry=datetime.now(timezone.utc) + SAS_LIFETIME)
            return f"{base}?{token}"
        return f"{base}?{(self.sas or '').lstrip('?')}"

    def container_client(self):
        from azure.storage.blob import ContainerClient

        credential = self.key and {"account_name": self.account, "account_key": self.key}
        url = f"{self.url}/{quote(self.container)}"
        if self.sas:
            url += "?" + self.sas.lstrip("?")
        return ContainerClient.from_container_url(url, credential=credential or None, retry_total=3)

    def list(self, folder: str) -> List[Tuple[str, int, Optional[bytes]]]:
        """The blobs under PREFIX/folder: (name, size, md5 or None); StorageRefused on a 403."""
        return self.list_under(f"{self.prefix}/{folder}")

    def list_under(self, start: str) -> List[Tuple[str, int, Optional[bytes]]]:
        from azure.core.exceptions import HttpResponseError

        try:
            with self.container_client() as client:
                return [(b.name, b.size, _md5(b)) for b in client.list_blobs(name_starts_with=start)
                        if b.name == start or start.endswith("/") or b.name.startswith(start + "/")]
        except HttpResponseError as exc:
            if exc.status_code == 403:
                raise StorageRefused(self.datastore, self.account, getattr(exc, "error_code", None)) from None
            raise


def _md5(blob) -> bytes | None:
    md5 = getattr(getattr(blob, "content_settings", None), "content_md5", None)
    return bytes(md5) if md5 else None


def default_output_folder(props: dict) -> tuple[str, str] | None:
    """(datastore, prefix) of the job's `default` output when it is a uri_folder on a datastore, as the SDK
    parses it (`...datastores/NAME/PREFIX`); None otherwise."""
    out = (props.get("outputs") or {}).get("default") or {}
    uri = str(out.get("uri") or "")
    if str(out.get("jobOutputType") or "").lower() != "uri_folder" or "datastores/" not in uri:
        return None
    name, _, prefix = uri.split("datastores/", 1)[1].partition("/")
    return (name, prefix.strip("/")) if name and prefix.strip("/") else None


def resolve_folder(ml, datastore: str, prefix: str, storage_endpoint: str | None) -> DatastoreFolder | None:
    """The datastore folder with the secret the SDK would sign with; None for a datastore without one
    (identity-based access), whose storage dtrain does not list."""
    from . import sdk

    ds = ml.datastores.get(datastore)
    container = getattr(ds, "container_name", None) or getattr(ds, "filesystem", None)
    account = getattr(ds, "account_name", None)
    kind = type(getattr(ds, "credentials", None)).__name__
    if not container or not account or kind in ("NoneCredentialConfiguration", "AadCredentialConfiguration"):
        return None
    secrets = sdk.datastore_secrets(ml.datastores, datastore)
    key, sas = getattr(secrets, "key", None), getattr(secrets, "sas_token", None)
    if not key and not sas:
        return None
    return DatastoreFolder(datastore, account, container, prefix,
                           account_url(account, getattr(ds, "endpoint", None), storage_endpoint), key=key, sas=sas)


def list_logs(folder: DatastoreFolder) -> dict[str, str]:
    """logFiles' shape from the datastore: each log's name under the folder -> a signed URL."""
    out = {}
    for sub in LOG_FOLDERS:
        for name, _, _ in folder.list(sub):
            out[name[len(folder.prefix) + 1:]] = folder.blob_url(name)
    return out


def refused(exc: StorageRefused, job: str):
    """What to say when the datastore refuses the listing and logFiles holds no user logs: a usage error (exit
    2 for `logs`), never an empty follow."""
    from ...errors import LogsUnavailable

    why = ("shared-key access is turned off on the account" if exc.code == "KeyBasedAuthenticationNotPermitted"
           else "the account refused the request")
    return LogsUnavailable(
        f"cannot read the logs of job '{job}': the run details list no user logs, and storage account "
        f"'{exc.account}' of datastore '{exc.datastore}' refused to list them ({exc.code or 'HTTP 403'}: {why})",
        hint=f"ask an owner of storage account '{exc.account}' to allow shared-key access (allowSharedKeyAccess), "
             f"or to grant your identity the 'Storage Blob Data Reader' role on it and switch datastore "
             f"'{exc.datastore}' to identity-based access; Azure ML Studio's 'Outputs + logs' tab shows them "
             "meanwhile")


class LogSources:
    """Where a job's user logs are read: `logFiles` while it lists any, else the job's default output folder
    on its datastore (resolved once, listed on every pass, as jobs.stream lists on every poll)."""

    def __init__(self, job: str, resolve):
        self.job = job
        self._resolve = resolve         # () -> DatastoreFolder | None
        self._folder: DatastoreFolder | None = None
        self._resolved = False

    def files(self, log_files: dict) -> dict:
        from .logs import user_logs

        if user_logs(log_files) or self._resolve is None:
            return log_files
        if not self._resolved:
            self._folder, self._resolved = self._resolve(), True
        if self._folder is None:
            return log_files
        try:
            return {**log_files, **list_logs(self._folder)}
        except StorageRefused as exc:
            raise refused(exc, self.job) from None
