"""An in-process emulator of the Azure ML REST API (resource manager, run history, blob storage).

It answers what ``azure.ai.ml.MLClient`` asks for when submitting, following, listing, cancelling
and streaming command jobs, on plain http bound to 127.0.0.1.  See docs/azure-emulator.md.
"""

from __future__ import annotations

import copy
import re
import socket
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from .artifact_store import ArtifactStore
from .blobs import BlobStorage
from .datastores import Datastores
from .capacity import Capacity
from .history import RunHistory
from .faults import RESET, RESET_AFTER, SLOW, STATUS, Fault, TokenExpiry, compile_pattern
from .mlflow_api import PATH_RE as _MLFLOW_RE
from .mlflow_api import MlflowTracking
from .monitor import MonitorMetrics
from .shapes import service_environment_properties, service_job_properties
from .spec import SpecValidator, default_validator, validate_job_body
from .wire import (
    BLOB_CONTAINER,
    Blob,
    CAE_CLAIMS,
    DEFAULT_DATASTORE,
    HTTPError,
    JobState,
    LOCATION,
    NOT_STARTED_STATUSES,
    RESOURCE_GROUP,
    RecordedRequest,
    SAS_QUERY,
    STORAGE_ACCOUNT,
    STORAGE_SUFFIX,
    SUBSCRIPTION_ID,
    StatusScript,
    TERMINAL_STATUSES,
    WORKSPACE,
    _ARM_WS_RE,
    _HISTORY_RE,
    _MFE_OPERATION_RE,
    _PROVIDER,
    _error_payload,
    _json,
    _now_iso,
    _num,
    _parse_json,
    _public,
    _retry_after,
    _system_data,
)

class AzureMLEmulator(RunHistory, BlobStorage):
    """Threaded HTTP emulator of Azure ML on ``http://127.0.0.1:<free port>``.

    Use as a context manager (or call :meth:`start` / :meth:`stop`).  Everything it receives is in
    :attr:`requests`; job bodies as PUT in :attr:`jobs`; uploaded blobs in :attr:`blobs`.
    """

    def __init__(
        self,
        subscription_id: str = SUBSCRIPTION_ID,
        resource_group: str = RESOURCE_GROUP,
        workspace: str = WORKSPACE,
        *,
        validator: Optional[SpecValidator] = None,
        validate_jobs: bool = True,
        check_references: bool = True,
        page_size: int = 20,
        require_bearer: bool = True,
        lro_retry_after: Optional[float] = 1,
        cancel_seconds: Optional[float] = 0.2,
        default_output: bool = True,
        storage_account: str = STORAGE_ACCOUNT,
        storage_suffix: str = STORAGE_SUFFIX,
        list_order: str = "newest",
        log_name_width: int = 0,
    ) -> None:
        # The datastore's account and the cloud's storage suffix: the SDK uploads local-path inputs to
        # https://{account}.blob.{suffix}, never to the emulator. A suffix under .invalid (RFC 6761:
        # UNRESOLVABLE_SUFFIX) names a host that never resolves, as a deleted or misspelt account does;
        # the client must use the same suffix (dtrain: DTRAIN_STORAGE_SUFFIX; make_ml_client passes it).
        self.storage_account = storage_account
        self.storage_suffix = storage_suffix
        self.subscription_id = subscription_id
        self.resource_group = resource_group
        self.workspace = workspace
        self.workspace_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{subscription_id}/{resource_group}/{workspace}"))
        self.validator = validator
        self.validate_jobs = validate_jobs
        self.check_references = check_references
        self.page_size = page_size
        self.require_bearer = require_bearer
        self.lro_retry_after = lro_retry_after
        self.cancel_seconds = cancel_seconds  # None: Canceled on the first read after the request
        # lro_retry_after=None answers a cancel as recorded: no Retry-After (the SDK then waits its own interval)
        # the order of a job list: no recording shows the service's; "oldest" answers oldest first
        self.list_order = list_order
        # rank numbers in user log names: 0 unpadded, 2 zero-padded (std_log_process_01.txt), both of which the
        # SDK's own pattern user_logs/std_log[\D]*[0]*(?:_ps)?\.txt reads
        self.log_name_width = log_name_width
        # the service adds outputs.default (the run's artifact folder); jobs.stream then lists logs
        # through that datastore over https, which a loopback emulator cannot serve: False leaves it out
        self.default_output = default_output

        self.requests: List[RecordedRequest] = []
        self.violations: List[Dict[str, Any]] = []  # rejected job PUTs: {"name", "errors", "body"}
        self.job_puts: List[Tuple[str, Dict[str, Any]]] = []  # every accepted job PUT, in order
        self.run_patches: List[Tuple[str, str, Any]] = []  # every run history PATCH: (run, path, body)
        self._jobs: Dict[str, JobState] = {}
        self.codes: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.environments: Dict[Tuple[str, str], Dict[str, Any]] = {}
        self.computes: Dict[str, Dict[str, Any]] = {}
        self.blobs: Dict[Tuple[str, str], Blob] = {}  # (container, blob name) -> Blob
        self._blocks: Dict[Tuple[str, str], Dict[str, bytes]] = {}
        self.faults: List[Fault] = []
        self.token_expiries: List[TokenExpiry] = []
        self.tokens_seen: List[str] = []
        self._operations: Dict[str, Dict[str, Any]] = {}
        self.datastores = Datastores(self)     # datastores.py: the service's two and any a client creates
        self.artifacts = ArtifactStore(self)   # workspaceartifactstore and where logs are listed (its modes)
        self.mlflow = MlflowTracking()   # the workspace's MLflow tracking API (mlflow.py): a run per job
        self.capacity = Capacity()       # usages (quota), retail prices (capacity.py)
        self.monitor = MonitorMetrics()  # Azure Monitor's metrics of the workspace (monitor.py): per node and GPU
        self._default_script = StatusScript()
        self._job_scripts: Dict[str, StatusScript] = {}
        self._lock = threading.RLock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self.port: Optional[int] = None
        for name, vm, nodes in (("cpu-cluster", "STANDARD_D2_V2", 4), ("gpu-cluster", "STANDARD_NC24", 4)):
            self.add_compute(name, vm_size=vm, max_nodes=nodes)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "AzureMLEmulator":
        if self._server is not None:
            return self
        emulator = self

        class Handler(_Handler):
            emu = emulator

        server = _Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="azureml-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "AzureMLEmulator":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the emulator is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def workspace_arm_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
            f"/providers/{_PROVIDER}/workspaces/{self.workspace}"
        )

    def arm_id(self, kind: str, name: str, version: Optional[str] = None) -> str:
        rid = f"{self.workspace_arm_id}/{kind}/{name}"
        return rid + (f"/versions/{version}" if version is not None else "")

    @property
    def storage_url(self) -> str:
        """Path-style account URL (like Azurite): the SDK's storage client parses IP hosts so."""
        return f"{self.url}/{self.storage_account}"

    @property
    def datastore_host(self) -> str:
        """The host the SDK sends datastore uploads (local-path inputs) to; not served by the emulator."""
        return f"{self.storage_account}.blob.{self.storage_suffix}"

    def cloud_metadata(self, name: str = "DtrainEmulator") -> Dict[str, Any]:
        """ARM cloud metadata (the shape of management.azure.com/metadata/endpoints)."""
        return {
            "name": name,
            "portal": self.url + "/portal/",
            "resourceManager": self.url + "/",
            "authentication": {"loginEndpoint": self.url + "/login/", "audiences": [self.url + "/"]},
            "suffixes": {"storage": self.storage_suffix},
        }

    def job_resource(self, name: str) -> Dict[str, Any]:
        """The job as a GET answers it now (without moving its status on)."""
        with self._lock:
            return self._job_resource(self._job(name), advance=False)

    # -- scripting ---------------------------------------------------------------------------------
    def script_job_statuses(
        self,
        statuses: Sequence[str],
        seconds_per_step: Optional[float] = 0.5,
        *,
        job: Optional[str] = None,
        error: Optional[Dict[str, Any]] = None,
        log_lines_per_step: int = 3,
    ) -> None:
        """Script how statuses move: for ``job`` (before or after it is created) or, without it,
        for every job created afterwards.  ``seconds_per_step=None``: one step per status read.
        ``error`` (``{"code":..., "message":...}``) is reported in run details when it Fails (and, when given,
        when it ends NotResponding or Paused: why a node was lost)."""
        script = StatusScript(tuple(statuses), seconds_per_step, error, log_lines_per_step)
        with self._lock:
            if job is None:
                self._default_script = script
            else:
                self._job_scripts[job] = script
                if job in self._jobs:
                    state = self._jobs[job]
                    state.script, state.created, state.reads = script, time.time(), 0

    def job_list_polls(self, since: int = 0) -> int:
        """Job lists asked for since request number ``since``, each counted once (its first page)."""
        return sum(1 for q in self.requests[since:]
                   if q.method == "GET" and q.path.endswith("/jobs") and "$skipToken" not in q.query)

    def end_after_list_polls(self, jobs: Sequence[str], polls: int = 2, status: str = "Completed",
                             timeout: float = 60.0) -> threading.Thread:
        """Script ``jobs`` to end in ``status`` once ``polls`` more job lists (their first pages) have been
        answered. A test that counts a client's polls then sees that many whatever the client's start-up
        costs (a clock-scripted end can come before a slow client's first poll)."""
        start = len(self.requests)

        def run() -> None:
            deadline = time.monotonic() + timeout
            while self.job_list_polls(start) < polls and time.monotonic() < deadline:
                time.sleep(0.02)
            for name in jobs:
                self.script_job_statuses([status], job=name)

        t = threading.Thread(target=run, name="end-after-list-polls", daemon=True)
        t.start()
        return t

    def add_fault(
        self,
        pattern: str,
        kind: str = STATUS,
        *,
        method: Optional[str] = None,
        count: Optional[int] = 1,
        skip: int = 0,
        status: int = 503,
        retry_after: Optional[float] = None,
        delay: float = 0.0,
        code: Optional[str] = None,
        message: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> Fault:
        fault = Fault(
            kind=kind,
            pattern=compile_pattern(pattern),
            method=method,
            count=count,
            skip=skip,
            status=status,
            retry_after=retry_after,
            delay=delay,
            code=code,
            message=message,
            headers=dict(headers or {}),
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def fail(self, pattern: str, status: int = 503, *, count: Optional[int] = 1, method: Optional[str] = None,
             retry_after: Optional[float] = None, skip: int = 0, code: Optional[str] = None,
             message: Optional[str] = None) -> Fault:
        """Answer matching requests with ``status`` (429 gets ``Retry-After`` if given); ``code`` and
        ``message`` go into the Azure error body instead of the defaults."""
        return self.add_fault(pattern, STATUS, method=method, count=count, status=status,
                              retry_after=retry_after, skip=skip, code=code, message=message)

    def throttle(self, pattern: str, retry_after: float = 1, *, count: Optional[int] = 1,
                 method: Optional[str] = None) -> Fault:
        return self.fail(pattern, 429, count=count, method=method, retry_after=retry_after)

    def reset_connection(self, pattern: str, *, count: Optional[int] = 1, method: Optional[str] = None,
                         skip: int = 0, after_processing: bool = False) -> Fault:
        """Close the socket (RST) without answering; with ``after_processing`` the request takes
        effect first (the answer is lost, as when a connection drops mid-response)."""
        return self.add_fault(pattern, RESET_AFTER if after_processing else RESET, method=method,
                              count=count, skip=skip)

    def refuse_uploads(self, status: int = 403, code: str = "AuthorizationPermissionMismatch",
                       message: str = "This request is not authorized to perform this operation using this "
                                      "permission.", *, count: Optional[int] = None) -> Fault:
        """Answer blob PUTs (uploads) with a storage error, as a storage firewall
        (AuthorizationFailure) or a missing Storage Blob Data Contributor role
        (AuthorizationPermissionMismatch) does; reads (HEAD/GET) still pass."""
        return self.add_fault(rf"^/{re.escape(self.storage_account)}/", STATUS, method="PUT", count=count, status=status,
                              code=code, message=message)

    def reset_uploads(self, *, count: Optional[int] = 1, skip: int = 0) -> Fault:
        """Drop the connection (RST) on blob PUTs before they are stored."""
        return self.add_fault(rf"^/{re.escape(self.storage_account)}/", RESET, method="PUT", count=count, skip=skip)

    def slow(self, pattern: str, seconds: float, *, count: Optional[int] = 1, method: Optional[str] = None) -> Fault:
        """Sleep ``seconds`` before answering normally."""
        return self.add_fault(pattern, SLOW, method=method, count=count, delay=seconds)

    def expire_token(self, token: str, after_requests: int = 0, challenge: str = "cae") -> TokenExpiry:
        """Answer 401 to requests carrying ``token`` once it was accepted ``after_requests`` times.

        ``challenge="cae"`` sends the Continuous Access Evaluation claims challenge
        (``WWW-Authenticate: Bearer ... error="insufficient_claims", claims="..."``) which azure-core's
        BearerTokenCredentialPolicy answers by getting a fresh token and retrying once;
        ``challenge="invalid_token"`` sends ``error="invalid_token"``, which the SDK surfaces as an error.
        """
        expiry = TokenExpiry(token, after_requests, challenge)
        with self._lock:
            self.token_expiries.append(expiry)
        return expiry

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()
            self.token_expiries.clear()

    def add_compute(self, name: str, *, vm_size: str = "STANDARD_D2_V2", max_nodes: int = 4,
                    compute_type: str = "AmlCompute") -> Dict[str, Any]:
        resource = {
            "id": self.arm_id("computes", name),
            "type": f"{_PROVIDER}/workspaces/computes",
            "name": name,
            "location": LOCATION,
            "properties": {
                "description": None,
                "createdOn": _now_iso(),
                "modifiedOn": _now_iso(),
                "computeType": compute_type,
                "computeLocation": LOCATION,
                "provisioningState": "Succeeded",
                "disableLocalAuth": True,
                "properties": {
                    "vmSize": vm_size,
                    "vmPriority": "Dedicated",
                    "osType": "Linux",
                    "scaleSettings": {"maxNodeCount": max_nodes, "minNodeCount": 0,
                                      "nodeIdleTimeBeforeScaleDown": "PT120S"},
                    "allocationState": "Steady",
                    "allocationStateTransitionTime": _now_iso(),
                    "errors": None,
                    "currentNodeCount": 0,
                    "targetNodeCount": 0,
                    "nodeStateCounts": {"preparingNodeCount": 0, "runningNodeCount": 0, "idleNodeCount": 0,
                                        "unusableNodeCount": 0, "leavingNodeCount": 0, "preemptedNodeCount": 0},
                    "enableNodePublicIp": True,
                },
            },
        }
        with self._lock:
            self.computes[name] = resource
        return resource

    def add_environment(self, name: str, version: str, image: str = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04",
                        **properties: Any) -> Dict[str, Any]:
        """Register an environment version (so ``azureml:name:version`` / ``name@latest`` resolve)."""
        body = {"properties": {"image": image, "osType": "Linux", **properties}}
        return self._store_environment(name, version, body)

    def log_metric(self, job: str, key: str, value: float, step: int = 0, timestamp: Optional[int] = None) -> None:
        """Record a metric point in the job's MLflow run, as mlflow.log_metric in the job would."""
        self.mlflow.log(job, key, value, step, timestamp)

    def append_log(self, job: str, text: str, rank: int = 0) -> None:
        """Append ``text`` to the log of one rank of a job."""
        with self._lock:
            state = self._jobs[job]
            state.extra_log[rank] = state.extra_log.get(rank, "") + text
            names = self._log_names(state)
            generated = len(self._generated_lines(state, names[rank], rank, len(names))) if rank < len(names) else 0
            state.appended.setdefault(rank, []).append((generated, text))

    # -- read access for tests -------------------------------------------------------------------------
    @property
    def jobs(self) -> Dict[str, Dict[str, Any]]:
        """Job name -> body as last PUT."""
        with self._lock:
            return {name: copy.deepcopy(state.body) for name, state in self._jobs.items()}

    def job_status(self, name: str) -> str:
        with self._lock:
            return self._status(self._jobs[name], advance=False)

    def blob_bytes(self, container: str, name: str) -> bytes:
        return self.blobs[(container, name)].data

    def uploaded_files(self, prefix: str = "") -> Dict[str, bytes]:
        """Blob name -> bytes of the blobs uploaded into the workspace blob container."""
        with self._lock:
            return {n: b.data for (c, n), b in self.blobs.items() if c == BLOB_CONTAINER and n.startswith(prefix)}

    def requests_to(self, pattern: str, method: Optional[str] = None) -> List[RecordedRequest]:
        rx = re.compile(pattern)
        with self._lock:
            return [r for r in self.requests if rx.search(r.path) and (method is None or r.method == method.upper())]

    def log_file_names(self, job: str) -> List[str]:
        with self._lock:
            return self._log_names(self._jobs[job])

    def log_content(self, job: str, name: str) -> str:
        with self._lock:
            return self._log_text(self._jobs[job], name)

    # =============================================================================================
    # request handling (called from handler threads)
    # =============================================================================================
    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def _check_faults(self, method: str, path: str) -> Optional[Fault]:
        with self._lock:
            faults = list(self.faults)
        for fault in faults:
            if fault.take(method, path):
                return fault
        return None

    def _check_token(self, token: Optional[str]) -> Optional[TokenExpiry]:
        if token is None:
            return None
        with self._lock:
            if token not in self.tokens_seen:
                self.tokens_seen.append(token)
            for expiry in self.token_expiries:
                if expiry.token == token:
                    if expiry.accepted >= expiry.after_requests:
                        expiry.rejected += 1
                        return expiry
                    expiry.accepted += 1
        return None

    def dispatch(self, method: str, path: str, query: Dict[str, str], headers: Dict[str, str],
                 body: bytes) -> Tuple[int, Dict[str, str], bytes]:
        account = self.storage_account
        if path.startswith(f"/{account}/") or path == f"/{account}":
            return self._blob(method, path[len(account) + 1:], query, headers, body)
        if path == "/metadata/endpoints":
            return _json(200, [self.cloud_metadata()])
        routed = self.capacity.route(self, method, path, query)
        if routed is not None:
            return routed
        if path.startswith("/discovery/"):
            return _json(200, self._discovery())
        if path.startswith("/studio/") or path.startswith("/portal/"):
            return 200, {"Content-Type": "text/html"}, b"<html><body>Azure ML emulator</body></html>"
        m = _MLFLOW_RE.match(path)
        if m:
            self._check_scope(m)
            return self.mlflow.dispatch(method, m.group("op"), query, _parse_json(body))
        m = _MFE_OPERATION_RE.match(path)
        if m and m.group("sub") == self.subscription_id:
            return self._operation("operationresults", unquote(m.group("op")))
        m = _HISTORY_RE.match(path)
        if m:
            self._check_scope(m)
            return self._history(method, m.group("run"), m.group("rest") or "", query, _parse_json(body))
        m = _ARM_WS_RE.match(path)
        if m:
            self._check_scope(m)
            return self._arm(method, m.group("rest") or "", query, headers, body)
        raise HTTPError(404, "NotFound", f"The emulator has no route for {method} {path}")

    def _check_scope(self, m: "re.Match[str]") -> None:
        if m.group("sub") != self.subscription_id or m.group("rg").lower() != self.resource_group.lower():
            raise HTTPError(404, "ResourceGroupNotFound", f"Resource group '{m.group('rg')}' could not be found.")
        if m.group("ws").lower() != self.workspace.lower():
            raise HTTPError(404, "ResourceNotFound",
                            f"The Resource '{_PROVIDER}/workspaces/{m.group('ws')}' under resource group "
                            f"'{m.group('rg')}' was not found.")

    # -- ARM -------------------------------------------------------------------------------------
    def _arm(self, method: str, rest: str, query: Dict[str, str], headers: Dict[str, str],
             raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
        parts = [unquote(p) for p in rest.strip("/").split("/")] if rest.strip("/") else []
        body = _parse_json(raw)
        n = len(parts)
        if n == 0 and method == "GET":
            return _json(200, self._workspace())
        if rest.strip("/").lower() == "providers/microsoft.insights/metrics" and method == "GET":
            return self.monitor.dispatch(query, self.workspace_arm_id, LOCATION)
        kind = parts[0].lower() if parts else ""
        if kind == "jobs":
            if n == 1 and method == "GET":
                return self._list_jobs(query)
            if n == 2 and method == "PUT":
                return self._put_job(parts[1], body)
            if n == 2 and method == "GET":
                with self._lock:
                    return _json(200, self._job_resource(self._job(parts[1]), advance=True))
            if n == 2 and method == "DELETE":
                with self._lock:
                    self._job(parts[1])
                    del self._jobs[parts[1]]
                return 200, {}, b""
            if n == 3 and parts[2].lower() == "cancel" and method == "POST":
                return self._cancel_job(parts[1])
        if kind == "codes":
            return self._versioned("codes", parts, method, query, body)
        if kind == "environments":
            return self._versioned("environments", parts, method, query, body)
        if kind == "computes":
            if n == 1 and method == "GET":
                with self._lock:
                    return _json(200, {"value": list(self.computes.values())})
            if n == 2 and method == "GET":
                with self._lock:
                    if parts[1] not in self.computes:
                        raise HTTPError(404, "ResourceNotFound", f"Compute '{parts[1]}' was not found.")
                    return _json(200, self.computes[parts[1]])
        if kind == "datastores":
            return self.datastores.call(method, parts, query, body)
        if kind in ("operationstatuses", "operationresults") and n == 2 and method == "GET":
            return self._operation(kind, parts[1])
        raise HTTPError(404, "NotFound", f"The emulator has no route for {method} {rest or '/'}")

    def _workspace(self) -> Dict[str, Any]:
        ws = self.workspace_arm_id
        sub_rg = f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
        return {
            "id": ws,
            "name": self.workspace,
            "type": f"{_PROVIDER}/workspaces",
            "location": LOCATION,
            "tags": {},
            "identity": {"type": "SystemAssigned", "principalId": str(uuid.UUID(int=1)),
                         "tenantId": str(uuid.UUID(int=2))},
            "sku": {"name": "Basic", "tier": "Basic"},
            "kind": "Default",
            "properties": {
                "workspaceId": self.workspace_id,
                "friendlyName": self.workspace,
                "description": "Azure ML emulator workspace",
                "storageAccount": f"{sub_rg}/providers/Microsoft.Storage/storageAccounts/{self.storage_account}",
                "keyVault": f"{sub_rg}/providers/Microsoft.KeyVault/vaults/dtrainemukv",
                "applicationInsights": f"{sub_rg}/providers/microsoft.insights/components/dtrainemuai",
                "containerRegistry": f"{sub_rg}/providers/Microsoft.ContainerRegistry/registries/dtrainemuacr",
                "discoveryUrl": f"{self.url}/discovery/workspaces/{self.workspace_id}",
                "mlFlowTrackingUri": f"azureml://127.0.0.1:{self.port}/mlflow/v1.0{ws}",
                "provisioningState": "Succeeded",
                "hbiWorkspace": False,
                "publicNetworkAccess": "Enabled",
                "v1LegacyMode": False,
                "privateLinkCount": 0,
                "storageHnsEnabled": False,
                "enableDataIsolation": False,
                "systemDatastoresAuthMode": "accessKey",
            },
            "systemData": _system_data(),
        }

    def _discovery(self) -> Dict[str, str]:
        keys = ("api", "catalog", "experimentation", "history", "modelmanagement", "pipelines", "studiometadata")
        return {k: self.url for k in keys} | {"gremlin": self.url, "registryBackend": self.url}

    def _datastore(self) -> Dict[str, Any]:
        return {
            "id": self.arm_id("datastores", DEFAULT_DATASTORE),
            "name": DEFAULT_DATASTORE,
            "type": f"{_PROVIDER}/workspaces/datastores",
            "properties": {
                "datastoreType": "AzureBlob",
                "accountName": self.storage_account,
                "containerName": BLOB_CONTAINER,
                "endpoint": self.storage_suffix,
                "protocol": "https",
                "serviceDataAccessAuthIdentity": "WorkspaceSystemAssignedIdentity",
                "credentials": {"credentialsType": "AccountKey", "secrets": None},
                "isDefault": True,
                "description": None,
                "tags": {},
                "properties": {},
            },
            "systemData": _system_data(),
        }

    # -- jobs --------------------------------------------------------------------------------------
    def _job(self, name: str) -> JobState:
        with self._lock:
            if name not in self._jobs:
                raise HTTPError(404, "UserError", f"Job {name} not found.")
            return self._jobs[name]

    def _put_job(self, name: str, body: Any) -> Tuple[int, Dict[str, str], bytes]:
        if self.validate_jobs:
            errors = validate_job_body(body, self.validator or default_validator())
            if errors:
                with self._lock:
                    self.violations.append({"name": name, "errors": errors, "body": body})
                raise HTTPError(400, "UserError", "Job body does not match the REST spec: " + "; ".join(errors))
        if self.check_references:
            self._check_job_references(body["properties"])
        with self._lock:
            self.job_puts.append((name, copy.deepcopy(body)))
            if name in self._jobs:
                state = self._jobs[name]
                state.body = copy.deepcopy(body)
                state.puts += 1
                return _json(200, self._job_resource(state, advance=False, put=True))
            script = self._job_scripts.get(name, self._default_script)
            state = JobState(name=name, body=copy.deepcopy(body), created=time.time(), script=script)
            self._jobs[name] = state
            self.mlflow.create_run(name, state.props.get("experimentName"))
            # the recorded create answers 201 with a Location naming the job (test_command_job_serverless.json)
            location = f"{self.url}{self.workspace_arm_id}/jobs/{name}?api-version=2025-01-01-preview"
            return _json(201, self._job_resource(state, advance=False, put=True), {"Location": location})

    def _check_job_references(self, props: Dict[str, Any]) -> None:
        """Compute, code and environment ids pointing into this workspace must exist."""
        prefix = self.workspace_arm_id.lower() + "/"
        for field_name, kind in (("computeId", "computes"), ("codeId", "codes"), ("environmentId", "environments")):
            rid = props.get(field_name)
            if not isinstance(rid, str) or not rid.lower().startswith(prefix):
                continue
            parts = rid[len(prefix):].split("/")
            with self._lock:
                if kind == "computes" and len(parts) == 2:
                    found = parts[1] in self.computes
                elif len(parts) == 4 and parts[2] == "versions":
                    found = (parts[1], parts[3]) in (self.codes if kind == "codes" else self.environments)
                else:
                    found = False
            if not found:
                with self._lock:
                    self.violations.append({"name": props.get("displayName"), "errors": [f"{field_name}: {rid} not found"],
                                            "body": {"properties": props}})
                if kind == "computes":          # the service's words (test_ray_command_job.json)
                    raise HTTPError(400, "UserError", f"Unknown compute target '{parts[-1]}'.")
                raise HTTPError(400, "UserError", f"{field_name} {rid} was not found in workspace {self.workspace}.")

    def _position(self, state: JobState, advance: bool) -> float:
        """Progress of a job through its script, in steps."""
        if state.frozen_position is not None:
            return state.frozen_position
        if state.script.seconds_per_step is None:
            if advance:
                state.reads += 1
            return float(state.reads)
        return (time.time() - state.created) / max(state.script.seconds_per_step, 1e-9)

    def _status(self, state: JobState, advance: bool) -> str:
        if state.cancel_requested is not None:
            if state.cancel_final is not None:
                return "Canceled"
            done = (
                self.cancel_seconds is not None and time.time() - state.cancel_requested >= self.cancel_seconds
            ) or (self.cancel_seconds is None and advance and state.cancel_reads >= 1)
            if advance:
                state.cancel_reads += 1
            if done:
                state.cancel_final = time.time()
                return "Canceled"
            return "CancelRequested"
        statuses = state.script.statuses
        index = min(int(self._position(state, advance)), len(statuses) - 1)
        if state.started is None and statuses[index] not in NOT_STARTED_STATUSES:
            state.started = self._start_time(state)
        return statuses[index]

    def _start_time(self, state: JobState) -> float:
        """When the script first left the not-started statuses: on the clock where the script runs on it,
        else now (the read that saw it)."""
        first = next(i for i, s in enumerate(state.script.statuses) if s not in NOT_STARTED_STATUSES)
        if state.script.seconds_per_step is None or state.frozen_position is not None:
            return time.time()
        return state.created + first * state.script.seconds_per_step

    def _job_resource(self, state: JobState, advance: bool, put: bool = False) -> Dict[str, Any]:
        """The job as the real service answers it (shapes.py): server-added fields, nulls, defaults."""
        status = self._status(state, advance)
        ws = self.workspace_arm_id
        wsid = f"/subscriptions/{self.subscription_id}/resourcegroups/{self.resource_group}/workspaces/{self.workspace}"
        ended = None
        if status in TERMINAL_STATUSES:
            ended = state.cancel_final or time.time()
        props = service_job_properties(
            state.name, state.props, status=status, put=put, created=state.created,
            tracking_uri=f"azureml://127.0.0.1:{self.port}/mlflow/v1.0{ws}?",
            studio_url=f"{self.url}/studio/runs/{state.name}?wsid={wsid}",
            default_output=self.default_output, started=state.started, ended=ended)
        return {
            "id": self.arm_id("jobs", state.name),
            "name": state.name,
            "type": f"{_PROVIDER}/workspaces/jobs",
            "properties": props,
            "systemData": {"createdAt": _now_iso(state.created), "createdBy": "dtrain emulator",
                           "createdByType": "User"},
        }

    def _list_jobs(self, query: Dict[str, str]) -> Tuple[int, Dict[str, str], bytes]:
        view = query.get("listViewType", "ActiveOnly")
        job_type = query.get("jobType")
        tag = query.get("tag")
        with self._lock:
            states = sorted(self._jobs.values(), key=lambda s: s.created, reverse=self.list_order != "oldest")
            selected = []
            for s in states:
                archived = bool(s.props.get("isArchived"))
                if view == "ActiveOnly" and archived or view == "ArchivedOnly" and not archived:
                    continue
                if job_type and s.props.get("jobType", "").lower() != job_type.lower():
                    continue
                if tag:
                    key, _, value = tag.partition("=")
                    tags = s.props.get("tags") or {}
                    if key not in tags or (value and tags[key] != value):
                        continue
                selected.append(s)
            start = int(query.get("$skipToken", "0") or 0)
            page = selected[start:start + self.page_size]
            result: Dict[str, Any] = {"value": [self._job_resource(s, advance=False) for s in page]}
            if start + self.page_size < len(selected):
                q = {k: v for k, v in query.items() if k != "$skipToken"}
                q["$skipToken"] = str(start + self.page_size)
                result["nextLink"] = f"{self.url}{self.workspace_arm_id}/jobs?{urlencode(q)}"
        return _json(200, result)

    def _cancel_job(self, name: str) -> Tuple[int, Dict[str, str], bytes]:
        with self._lock:
            state = self._job(name)
            status = self._status(state, advance=False)
            if status not in TERMINAL_STATUSES and state.cancel_requested is None:
                state.frozen_position = self._position(state, advance=False)
                state.cancel_requested = time.time()
            op_id = uuid.uuid4().hex
            self._operations["jc:" + op_id] = {"job": name, "created": time.time()}
        # as recorded: 202, a null body, only a Location under the region's mfeOperationResults (no
        # Azure-AsyncOperation); Retry-After only where a test asks for a quick poll (lro_retry_after)
        location = (f"{self.url}/subscriptions/{self.subscription_id}/providers/{_PROVIDER}/locations/{LOCATION}"
                    f"/mfeOperationResults/jc:{op_id}?api-version=2023-04-01-preview")
        headers = {"Location": location, "Content-Length": "0"}
        if self.lro_retry_after is not None:
            headers.update(_retry_after(self.lro_retry_after))
        return 202, headers, b""

    def _operation(self, kind: str, op_id: str) -> Tuple[int, Dict[str, str], bytes]:
        with self._lock:
            if op_id not in self._operations:
                raise HTTPError(404, "NotFound", f"Operation {op_id} not found.")
            op = self._operations[op_id]
            state = self._jobs.get(op["job"])
            done = state is None or self._status(state, advance=True) != "CancelRequested"
        retry = _retry_after(self.lro_retry_after) if self.lro_retry_after is not None else {}
        if kind == "operationstatuses":
            body = {"id": op_id, "name": op_id, "status": "Succeeded" if done else "InProgress",
                    "startTime": _now_iso(op["created"])}
            if done:
                body["endTime"] = _now_iso()
            return _json(200, body, {} if done else retry)
        if not done:
            return 202, dict(retry, **{"Content-Length": "0"}), b""
        return 200, {"Content-Length": "0"}, b""

    # -- code and environment versions ----------------------------------------------------------------
    def _versioned(self, kind: str, parts: List[str], method: str, query: Dict[str, str],
                   body: Any) -> Tuple[int, Dict[str, str], bytes]:
        store = self.codes if kind == "codes" else self.environments
        n = len(parts)
        if n == 2 and method == "GET":
            with self._lock:
                versions = [r for (nm, _), r in store.items() if nm == parts[1]]
            if not versions:
                raise HTTPError(404, "UserError", f"Could not find asset with name {parts[1]}")
            latest = max(versions, key=lambda r: r["systemData"]["createdAt"])
            return _json(200, {
                "id": self.arm_id(kind, parts[1]), "name": parts[1], "type": f"{_PROVIDER}/workspaces/{kind}",
                "properties": {"latestVersion": latest["name"], "nextVersion": None, "isArchived": False,
                               "description": None, "tags": {}, "properties": {}},
                "systemData": _system_data(),
            })
        if n == 3 and parts[2] == "versions" and method == "GET":
            return self._list_versions(kind, store, parts[1], query)
        if n == 4 and parts[2] == "versions":
            key = (parts[1], parts[3])
            if method == "GET":
                with self._lock:
                    if key not in store:
                        raise HTTPError(404, "UserError", f"Could not find asset with name {key[0]} and version {key[1]}")
                    return _json(200, store[key])
            if method == "PUT":
                if not isinstance(body, dict) or not isinstance(body.get("properties"), dict):
                    raise HTTPError(400, "UserError", "The request body must have a properties object.")
                with self._lock:
                    existed = key in store
                if kind == "codes":
                    resource = self._store_code(key[0], key[1], body)
                else:
                    resource = self._store_environment(key[0], key[1], body)
                # the recorded environment create answers 201 with a Location naming it (test_ray_command_job.json)
                location = {"Location": f"{self.url}{resource['id']}?api-version={query.get('api-version', '')}"}
                return _json(200 if existed else 201, resource, location if kind == "environments" and not existed
                             else None)
        if n == 5 and parts[2] == "versions" and parts[4] == "startPendingUpload" and method == "POST":
            return _json(200, self._pending_upload(kind, parts[1], parts[3], body))
        raise HTTPError(404, "NotFound", f"The emulator has no route for {method} {kind}/{'/'.join(parts[1:])}")

    def _list_versions(self, kind: str, store: Dict[Tuple[str, str], Dict[str, Any]], name: str,
                       query: Dict[str, str]) -> Tuple[int, Dict[str, str], bytes]:
        want_hash = query.get("hash")
        with self._lock:
            if want_hash:
                # content-hash lookup: the SDK asks under a fresh random name for anonymous code, and
                # the service answers with any version in the workspace holding that content hash
                items = [r for r in store.values()
                         if str((r["properties"].get("properties") or {}).get("hash_sha256")) == want_hash
                         and str((r["properties"].get("properties") or {}).get("hash_version"))
                         == query.get("hashVersion", str((r["properties"].get("properties") or {}).get("hash_version")))]
            else:
                items = [r for (nm, _), r in store.items() if nm == name]
        items.sort(key=lambda r: r["systemData"]["createdAt"], reverse=True)
        top = query.get("$top")
        if top:
            items = items[: int(top)]
        return _json(200, {"value": [_public(r) for r in items]})

    def _pending_upload(self, kind: str, name: str, version: str, body: Any) -> Dict[str, Any]:
        folder = f"LocalUpload/{uuid.uuid4().hex}"
        container_url = f"{self.storage_url}/{BLOB_CONTAINER}"
        return {
            "blobReferenceForConsumption": {
                "blobUri": f"{container_url}/{folder}",
                "storageAccountArmId": self._workspace()["properties"]["storageAccount"],
                "credential": {"credentialType": "SAS", "sasUri": f"{container_url}/{folder}?{SAS_QUERY}"},
            },
            "pendingUploadId": (body or {}).get("pendingUploadId") or uuid.uuid4().hex,
            "pendingUploadType": "TemporaryBlobReference",
        }

    def _store_code(self, name: str, version: str, body: Dict[str, Any]) -> Dict[str, Any]:
        props = copy.deepcopy(body["properties"])
        props.setdefault("isAnonymous", False)
        props.setdefault("isArchived", False)
        props.setdefault("provisioningState", "Succeeded")
        resource = {"id": self.arm_id("codes", name, version), "name": version,
                    "type": f"{_PROVIDER}/workspaces/codes/versions", "properties": props,
                    "systemData": _system_data()}
        with self._lock:
            self.codes[(name, version)] = resource
        return resource

    def _store_environment(self, name: str, version: str, body: Dict[str, Any]) -> Dict[str, Any]:
        props = service_environment_properties(body["properties"])
        resource = {"id": self.arm_id("environments", name, version), "name": version,
                    "type": f"{_PROVIDER}/workspaces/environments/versions", "properties": props,
                    "systemData": _system_data()}
        with self._lock:
            self.environments[(name, version)] = resource
        return resource


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------




class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # connection resets (injected or by clients going away) are expected; stay quiet
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    emu: AzureMLEmulator  # set on the subclass made per emulator

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def _handle(self) -> None:
        emu = self.emu
        split = urlsplit(self.path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raw = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if "authorization" in headers:
            headers["authorization"] = "Bearer <redacted>" if token is not None else "<redacted>"
        is_blob = path.startswith(f"/{emu.storage_account}/")
        ctype = headers.get("content-type", "")
        body = _parse_json(raw) if "json" in ctype or (raw[:1] in (b"{", b"[")) else None
        record = RecordedRequest(self.command, path, query, headers, token is not None, body,
                                 raw if not is_blob or len(raw) < 1 << 20 else raw[: 1 << 20], time.time())
        emu._record(record)

        fault = emu._check_faults(self.command, path)
        if fault is not None and fault.kind == RESET:
            record.fault = "reset"
            self._reset()
            return
        if fault is not None and fault.kind == SLOW:
            record.fault = f"slow {fault.delay}s"
            time.sleep(fault.delay)
            fault = None
        if fault is not None and fault.kind == STATUS:
            record.fault = f"status {fault.status}"
            extra = dict(fault.headers)
            if fault.retry_after is not None:
                extra["Retry-After"] = _num(fault.retry_after)
            code = fault.code or {429: "TooManyRequests", 500: "InternalServerError",
                                   503: "ServiceUnavailable"}.get(fault.status, "Error")
            message = fault.message or f"Injected fault: HTTP {fault.status}."
            # a service that echoes the request's credential back in its error text
            message = message.replace("{authorization}", auth).replace("{token}", token or "")
            self._error(record, fault.status, code, message, extra, is_blob)
            return

        needs_bearer = not is_blob and not path.startswith(("/discovery/", "/metadata/", "/studio/", "/portal/", "/api/retail/"))
        if needs_bearer and emu.require_bearer and token is None:
            self._error(record, 401, "AuthenticationFailed", "Authentication failed: no bearer token.",
                        {"WWW-Authenticate": 'Bearer authorization_uri="https://login.microsoftonline.com/common", '
                                             'error="invalid_token", error_description="No access token"'}, False)
            return
        expiry = emu._check_token(token) if needs_bearer else None
        if expiry is not None:
            record.fault = "token expired"
            if expiry.challenge == "cae":
                challenge = ('Bearer authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", '
                             f'error="insufficient_claims", claims="{CAE_CLAIMS}"')
            else:
                challenge = ('Bearer authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", '
                             'error="invalid_token", error_description="The access token has expired"')
            self._error(record, 401, "ExpiredAuthenticationToken",
                        "The access token expiry UTC time is earlier than current UTC time.",
                        {"WWW-Authenticate": challenge}, False)
            return
        try:
            status, out_headers, payload = emu.dispatch(self.command, path, query, headers, raw)
        except HTTPError as err:
            if fault is not None and fault.kind == RESET_AFTER:
                record.status, record.fault = err.status, "reset after processing"
                self._reset()
                return
            self._error(record, err.status, err.code, err.message, err.headers, is_blob)
            return
        except Exception as err:  # pragma: no cover - emulator bug: answer 500 with the reason
            self._error(record, 500, "EmulatorError", f"{type(err).__name__}: {err}", {}, is_blob)
            return
        record.status = status
        if fault is not None and fault.kind == RESET_AFTER:
            record.fault = "reset after processing"
            self._reset()
            return
        record.response_bytes = 0 if self.command == "HEAD" else len(payload)
        self._send(status, out_headers, payload)

    def _read_chunked(self) -> bytes:
        data = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return data
            data += self.rfile.read(size)
            self.rfile.readline()

    def _error(self, record: RecordedRequest, status: int, code: str, message: str,
               headers: Dict[str, str], blob: bool) -> None:
        record.status = status
        ctype, payload = _error_payload(status, code, message, blob)
        out = {"Content-Type": ctype}
        if blob:        # the Blob service names its error in a header; ARM only in the body (recorded 400s)
            out["x-ms-error-code"] = code
        out.update(headers)
        self._send(status, out, b"" if self.command == "HEAD" else payload)

    def _send(self, status: int, headers: Dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        has_length = any(k.lower() == "content-length" for k in headers)
        for k, v in headers.items():
            self.send_header(k, v)
        if not has_length:
            self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        self.send_header("Date", self.date_time_string())
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)

    def _reset(self) -> None:
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle
