"""The emulator's wire: the names, shapes and small helpers every route shares (the service's constants, the
recorded request, a job's scripted state, a blob, the JSON and error answers). No routes: server.py dispatches,
history.py and blobs.py answer run history and blob storage."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any, Dict, List, Optional, Tuple
from xml.sax.saxutils import escape as xml_escape

SUBSCRIPTION_ID = "00000000-1111-2222-3333-444444444444"
RESOURCE_GROUP = "dtrain-rg"
WORKSPACE = "dtrain-ws"
LOCATION = "eastus"
STORAGE_ACCOUNT = "dtrainemustorage"
STORAGE_SUFFIX = "core.windows.net"
UNRESOLVABLE_SUFFIX = "storage.invalid"
DEFAULT_DATASTORE = "workspaceblobstore"
ARTIFACT_CONTAINER = "azureml"    # the container of datastore workspaceartifactstore (artifact_store.py)
BLOB_CONTAINER = "azureml-blobstore-00000000-0000-0000-0000-000000000000"
SAS_QUERY = "sv=2021-08-06&sr=c&sp=racwl&se=2099-01-01T00%3A00%3A00Z&sig=ZW11bGF0b3I%3D"

TERMINAL_STATUSES = ("Completed", "Failed", "Canceled", "NotResponding", "Paused")
# the recorded job create answers Starting and the next GET Preparing (test_command_job_serverless.json)
DEFAULT_SCRIPT = ("Starting", "Preparing", "Queued", "Running", "Finalizing", "Completed")
# statuses before the run starts: no startTimeUtc yet (the service sets it when the job starts)
NOT_STARTED_STATUSES = ("NotStarted", "Starting", "Provisioning", "Preparing", "Queued")
CAE_CLAIMS = base64.b64encode(
    b'{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}'
).decode("ascii")

_PROVIDER = "Microsoft.MachineLearningServices"
_ARM_WS_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)(?P<rest>/.*)?$",
    re.IGNORECASE,
)
# where the recorded cancel's Location points: a subscription-level operation result, not the workspace
_MFE_OPERATION_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.MachineLearningServices/locations/[^/]+"
    r"/mfeOperationResults/(?P<op>[^/]+)$",
    re.IGNORECASE,
)
_HISTORY_RE = re.compile(
    r"^/history/v1\.0/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)(?:/experiments/(?P<exp>[^/]+))?"
    r"/runs/(?P<run>[^/]+)(?P<rest>/.*)?$",
    re.IGNORECASE,
)


def _now_iso(ts: Optional[float] = None) -> str:
    dt = datetime.fromtimestamp(ts if ts is not None else time.time(), tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _http_date(ts: float) -> str:
    return formatdate(ts, usegmt=True)


class HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


# ---------------------------------------------------------------------------------------------
# recorded state
# ---------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request the emulator received.  ``headers`` has Authorization redacted; ``bearer``
    says whether a ``Bearer`` token was present."""

    method: str
    path: str
    query: Dict[str, str]
    headers: Dict[str, str]
    bearer: bool
    body: Any
    raw_body: bytes
    time: float
    status: Optional[int] = None
    fault: Optional[str] = None
    response_bytes: int = 0  # body bytes answered (benchmarks: bytes fetched per byte of log)

    @property
    def api_version(self) -> Optional[str]:
        return self.query.get("api-version")

    def __repr__(self) -> str:  # short, for assertion messages
        return f"<{self.method} {self.path} -> {self.status}{' ' + self.fault if self.fault else ''}>"


@dataclass
class StatusScript:
    """How a job's status moves.  ``seconds_per_step=None`` advances one step per status read
    (a GET of the job or of its run details); a number advances on wall-clock time."""

    statuses: Tuple[str, ...] = DEFAULT_SCRIPT
    seconds_per_step: Optional[float] = 0.5
    error: Optional[Dict[str, Any]] = None
    log_lines_per_step: int = 3

    def __post_init__(self) -> None:
        self.statuses = tuple(self.statuses)
        if not self.statuses:
            raise ValueError("a status script needs at least one status")


@dataclass
class Blob:
    data: bytes
    content_type: str = "application/octet-stream"
    metadata: Dict[str, str] = field(default_factory=dict)
    last_modified: float = field(default_factory=time.time)

    @property
    def etag(self) -> str:
        return '"0x' + hashlib.md5(self.data + str(self.last_modified).encode()).hexdigest()[:16].upper() + '"'


@dataclass
class JobState:
    name: str
    body: Dict[str, Any]  # the body as PUT
    created: float
    script: StatusScript
    reads: int = 0
    cancel_requested: Optional[float] = None
    cancel_reads: int = 0
    cancel_final: Optional[float] = None
    started: Optional[float] = None  # when the run left the not-started statuses: the run's startTimeUtc
    extra_log: Dict[int, str] = field(default_factory=dict)
    # (generated lines at the time, text) per rank: appended text stays where it was written, so a
    # log only ever grows at its end, as real log files do (Range reads rely on that)
    appended: Dict[int, List[Tuple[int, str]]] = field(default_factory=dict)
    frozen_position: Optional[float] = None
    puts: int = 1

    @property
    def props(self) -> Dict[str, Any]:
        return self.body.get("properties", {})


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _retry_after(seconds: float) -> Dict[str, str]:
    """ARM sends whole seconds (the SDK deserializes the LRO Retry-After header as int); a
    fractional delay is sent as x-ms-retry-after-ms, which azure-core's polling also honours."""
    if float(seconds).is_integer():
        return {"Retry-After": str(int(seconds))}
    return {"x-ms-retry-after-ms": str(int(round(seconds * 1000)))}


def _meta(headers: Dict[str, str]) -> Dict[str, str]:
    return {k[len("x-ms-meta-"):]: v for k, v in headers.items() if k.startswith("x-ms-meta-")}


def _system_data() -> Dict[str, Any]:
    now = _now_iso()
    return {"createdAt": now, "createdBy": "dtrain emulator", "createdByType": "User",
            "lastModifiedAt": now, "lastModifiedBy": "dtrain emulator", "lastModifiedByType": "User"}


def _public(resource: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in resource.items() if not k.startswith("_")}


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def _json(status: int, payload: Any, headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes]:
    out = {"Content-Type": "application/json; charset=utf-8"}
    out.update(headers or {})
    if isinstance(payload, dict):
        payload = _public(payload)
    return status, out, json.dumps(payload).encode("utf-8")


def _error_payload(status: int, code: str, message: str, blob: bool) -> Tuple[str, bytes]:
    if blob:
        xml = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{xml_escape(code)}</Code>'
               f"<Message>{xml_escape(message)}</Message></Error>")
        return "application/xml", xml.encode("utf-8")
    body = {"error": {"code": code, "message": message, "target": None, "details": [],   # as recorded (ray job 400)
                      "additionalInfo": [{"type": "ComponentName", "info": {"value": "managementfrontend"}}]}}
    return "application/json; charset=utf-8", json.dumps(body).encode("utf-8")
