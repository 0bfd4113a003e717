"""The workspace's MLflow tracking API, as the emulator serves it (docs/azure-emulator.md, MLflow).

Azure ML answers MLflow's REST API (https://mlflow.org/docs/latest/rest-api.html) under the
workspace's tracking URI: `azureml://<host>/mlflow/v1.0/<workspace id>` becomes
`https://<host>/mlflow/v2.0/<workspace id>/api/2.0/mlflow/...` (azureml-mlflow's
AzureMLAbstractRestStore uses /mlflow/v2.0 with mlflow >= 2, /mlflow/v1.0 with mlflow 1.x; both are
served here). Each job has a run whose id is the job name, in the experiment named by the job's
`experimentName` ("Default" when none). Answers and errors are in MLflow's JSON shapes
(`{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": ...}`).
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

PATH_RE = re.compile(
    r"^/mlflow/v[12]\.0/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)/api/2\.0/mlflow/(?P<op>.+)$",
    re.IGNORECASE,
)
_IN_FILTER = re.compile(r"^\s*attributes\.run_id\s+IN\s*\((?P<ids>[^)]*)\)\s*$", re.I)
_EQ_FILTER = re.compile(r"^\s*attributes\.run_id\s*=\s*'(?P<id>[^']*)'\s*$", re.I)

Answer = Tuple[int, Dict[str, str], bytes]


def _answer(status: int, payload: Any) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode("utf-8")


def _error(status: int, code: str, message: str) -> Answer:
    return _answer(status, {"error_code": code, "message": message})


def _token(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def _offset(token: Optional[str]) -> int:
    if not token:
        return 0
    return int(json.loads(base64.b64decode(token))["offset"])


class MlflowTracking:
    """Experiments, runs and metric points, answering MLflow REST calls. Thread-safe."""

    def __init__(self, history_page: int = 1000, search_page: int = 100, run_id_filter: bool = True):
        self.history_page = history_page      # get-history's largest page (its default max_results)
        self.search_page = search_page        # runs/search's largest page
        self.run_id_filter = run_id_filter    # False: answer `attributes.run_id IN (...)` with 400, as a
        #                                       service that does not support attribute filters would
        self.experiments: Dict[str, str] = {}  # name -> id
        self.runs: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.RLock()

    # -- for the emulator and tests ----------------------------------------------------------------
    def experiment_id(self, name: str) -> str:
        with self._lock:
            if name not in self.experiments:
                self.experiments[name] = str(uuid.uuid5(uuid.NAMESPACE_URL, "emulator-experiment:" + name))
            return self.experiments[name]

    def create_run(self, run_id: str, experiment_name: Optional[str]) -> None:
        with self._lock:
            if run_id not in self.runs:
                self.runs[run_id] = {"experiment_id": self.experiment_id(experiment_name or "Default"),
                                     "start_time": int(time.time() * 1000), "metrics": {}}

    def log(self, run_id: str, key: str, value: float, step: int = 0, timestamp: Optional[int] = None) -> None:
        with self._lock:
            run = self.runs[run_id]
            run["metrics"].setdefault(key, []).append(
                {"key": key, "value": float(value), "timestamp": int(timestamp if timestamp is not None
                                                                     else time.time() * 1000), "step": int(step)})

    def points(self, run_id: str, key: str) -> List[Dict[str, Any]]:
        with self._lock:
            return [dict(p) for p in self.runs[run_id]["metrics"].get(key, [])]

    # -- REST ------------------------------------------------------------------------------------------
    def dispatch(self, method: str, op: str, query: Dict[str, str], body: Any) -> Answer:
        body = body if isinstance(body, dict) else {}
        with self._lock:
            if op == "runs/get" and method == "GET":
                run = self.runs.get(query.get("run_id") or query.get("run_uuid") or "")
                if run is None:
                    return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{query.get('run_id')}' not found")
                return _answer(200, {"run": self._run(query.get("run_id") or query["run_uuid"], run)})
            if op == "metrics/get-history" and method == "GET":
                return self._history(query)
            if op == "runs/search" and method == "POST":
                return self._search(body)
            if op == "experiments/get-by-name" and method == "GET":
                name = query.get("experiment_name", "")
                if name not in self.experiments:
                    return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name}'")
                return _answer(200, {"experiment": {"experiment_id": self.experiments[name], "name": name,
                                                    "lifecycle_stage": "active"}})
            if op in ("runs/log-metric", "runs/log-batch") and method == "POST":
                run_id = body.get("run_id") or body.get("run_uuid") or ""
                if run_id not in self.runs:
                    return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found")
                for m in ([body] if op == "runs/log-metric" else body.get("metrics") or []):
                    self.log(run_id, m["key"], float(m["value"]), int(m.get("step") or 0), int(m["timestamp"]))
                return _answer(200, {})
        return _error(404, "ENDPOINT_NOT_FOUND", f"the emulator has no MLflow route for {method} {op}")

    def _run(self, run_id: str, run: Dict[str, Any]) -> Dict[str, Any]:
        latest = [max(pts, key=lambda p: (p["step"], p["timestamp"])) for pts in run["metrics"].values() if pts]
        return {"info": {"run_id": run_id, "run_uuid": run_id, "run_name": run_id,
                         "experiment_id": run["experiment_id"], "status": "RUNNING",
                         "start_time": run["start_time"], "lifecycle_stage": "active",
                         "artifact_uri": f"azureml://experiments/{run['experiment_id']}/runs/{run_id}/artifacts"},
                "data": {"metrics": [dict(p) for p in latest], "params": [], "tags": []}}

    def _history(self, query: Dict[str, str]) -> Answer:
        run = self.runs.get(query.get("run_id") or query.get("run_uuid") or "")
        if run is None:
            return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{query.get('run_id')}' not found")
        pts = run["metrics"].get(query.get("metric_key", ""), [])
        size = min(int(query.get("max_results") or self.history_page), self.history_page)
        start = _offset(query.get("page_token"))
        page = pts[start:start + size]
        out: Dict[str, Any] = {"metrics": [dict(p) for p in page]}
        if start + size < len(pts):
            out["next_page_token"] = _token(start + size)
        return _answer(200, out)

    def _search(self, body: Dict[str, Any]) -> Answer:
        exp_ids = set(body.get("experiment_ids") or [])
        flt = (body.get("filter") or "").strip()
        ids = None
        if flt:
            m_in, m_eq = _IN_FILTER.match(flt), _EQ_FILTER.match(flt)
            if not self.run_id_filter or not (m_in or m_eq):
                return _error(400, "INVALID_PARAMETER_VALUE", f"Unsupported filter string format: {flt}")
            ids = {m_eq.group("id")} if m_eq else {s.strip().strip("'\"") for s in m_in.group("ids").split(",")}
        runs = [(rid, r) for rid, r in self.runs.items()
                if r["experiment_id"] in exp_ids and (ids is None or rid in ids)]
        runs.sort(key=lambda x: x[1]["start_time"], reverse=True)
        size = min(int(body.get("max_results") or self.search_page), self.search_page)
        start = _offset(body.get("page_token"))
        out: Dict[str, Any] = {"runs": [self._run(rid, r) for rid, r in runs[start:start + size]]}
        if start + size < len(runs):
            out["next_page_token"] = _token(start + size)
        return _answer(200, out)
