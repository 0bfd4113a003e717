"""An Azure job's files for `dtrain download`, found where azure-ai-ml's jobs.download finds them.

Outputs: each output's URI as the job resource gives it (`azureml://datastores/NAME/paths/PATH`, or the
`default` output's `azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.JOB`); an output the
resource gives no URI is looked for where the SDK looks (_get_named_output_uri): `azureml/JOB/OUTPUT/`, then
`dataset/JOB/OUTPUT/` on the default datastore. Each is listed on the datastore's storage (storage_logs.py:
the datastore's listSecrets secret, DTRAIN_STORAGE_ENDPOINT path-style). Logs: what `dtrain logs` reads
(logFiles, else the default output's log folders). Every file is read by byte ranges from any offset.
"""
from __future__ import annotations

import re
from functools import partial
from typing import Iterator

from ...errors import UsageError
from ..files import CHUNK, JobFile, log_path, output_path
from .storage_logs import DatastoreFolder, resolve_folder

_URI = re.compile(r"^azureml://datastores/([^/]+)/(?:paths/)?(.*)$")
_HEADERS = {"x-ms-version": "2021-08-06"}


def read_url(url: str, size: int, offset: int) -> Iterator[bytes]:
    """The blob's bytes from offset to size - 1 (one ranged GET, streamed)."""
    import requests

    if offset >= size:
        return
    rng = f"bytes={offset}-{size - 1}"
    with requests.get(url, headers={"Range": rng, "x-ms-range": rng, **_HEADERS}, stream=True, timeout=(5, 60)) as r:
        if r.status_code not in (200, 206):
            raise UsageError(f"could not read {url.split('?')[0]}: HTTP {r.status_code}", hint="run the same command again")
        skip = offset if r.status_code == 200 else 0          # a server that ignored the range
        for block in r.iter_content(CHUNK):
            if skip:
                block, skip = block[skip:], max(0, skip - len(block))
            if block:
                yield block


def _listed(folder: DatastoreFolder, output: str) -> list[JobFile]:
    """The files under the folder (or the one file the prefix names), placed under named-outputs/OUTPUT."""
    files = []
    for blob, size, md5 in folder.list_under(folder.prefix):
        rel = blob[len(folder.prefix):].lstrip("/") or blob.rsplit("/", 1)[-1]
        files.append(JobFile(output_path(output, rel), size, partial(read_url, folder.blob_url(blob), size), md5=md5))
    return files


def output_files(ml, job: str, props: dict, outputs: list | None, storage_endpoint: str | None) -> list[JobFile]:
    declared = {k: (v or {}).get("uri") for k, v in (props.get("outputs") or {}).items()}
    wanted = sorted(declared) if outputs is None else outputs
    unknown = [o for o in wanted if o not in declared]
    if unknown:
        raise UsageError(f"job '{job}' has no output named {', '.join(unknown)}",
                         hint="its outputs: " + (", ".join(sorted(declared)) or "none"))
    files: list[JobFile] = []
    for name in wanted:
        candidates = [declared[name]] if declared[name] else [
            f"azureml://datastores/{ml.datastores.get_default().name}/paths/{base}/{job}/{name}/"
            for base in ("azureml", "dataset")]
        for uri in candidates:
            m = _URI.match(str(uri))
            if not m:
                raise UsageError(f"output '{name}' of job '{job}' is at {uri}, not on a datastore",
                                 hint="dtrain downloads outputs stored on the workspace's datastores")
            folder = resolve_folder(ml, m.group(1), m.group(2).rstrip("/"), storage_endpoint)
            found = _listed(folder, name) if folder else []
            if found:
                files += found
                break
    return files


def log_files(urls: dict) -> list[JobFile]:
    """Each log (name -> signed URL, as LogSources gives them) with its size from a 0-0 range read."""
    import requests

    from .logs import _blob_size

    files = []
    with requests.Session() as s:
        for name, url in sorted(urls.items()):
            size = _blob_size(s, url)
            if size is not None:
                files.append(JobFile(log_path(name), size, partial(read_url, url, size)))
    return files
