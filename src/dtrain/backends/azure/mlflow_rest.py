"""A job's metrics from the workspace's MLflow tracking API, over the Azure backend's own HTTP pipeline.

Azure ML records a job's metrics through MLflow; the run id is the job name. The workspace resource
names its tracking URI (`properties.mlFlowTrackingUri`, `azureml://<region>.api.azureml.ms/mlflow/
v1.0/subscriptions/.../workspaces/<ws>`). azureml-mlflow turns it into a REST base the way
`tracking_base` does: `https://<host>` + `/mlflow/v2.0` (its choice for mlflow >= 2) + the workspace
scope, then MLflow's own paths (`/api/2.0/mlflow/runs/get`, `metrics/get-history`, `runs/search`,
`experiments/get-by-name`), with an ARM token (`<resource manager>/.default`). dtrain speaks those few
calls itself: no mlflow or azureml-mlflow dependency.

The pipeline is azure-core's, as MLClient's: the same credential, the retry policy (429 with its
Retry-After, 408/500/502/503/504, resets; DTRAIN_AZURE_RETRIES), bearer tokens over https only
(plain http only to a loopback emulator, client.py); no header is ever logged.

Incremental (RunMetrics.poll): one runs/get a poll says each metric's latest point; only a metric
whose latest point moved is read, with get-history from the page where the last read ended (its
page token; the API has no "since step"), keeping what was seen of that page so no point is returned
twice: a poll reads the new points plus at most one page of known ones per metric that moved. Nothing is committed
until a read succeeds, so a failed poll (retries exhausted) loses nothing: the next one starts
where the last good one ended.
"""
from __future__ import annotations

import json
from urllib.parse import urlsplit

from ..base import MetricPoint, sort_points
from .endpoint_url import is_loopback_host

API = "/api/2.0/mlflow/"
# Points per get-history request. MLflow's page tokens are opaque, so a read resumes at the start of the
# page it last ended in: a smaller page re-reads fewer known points (at most HISTORY_PAGE - 1 per metric
# that moved), a larger one costs fewer requests on a first read. docs/benchmarks.md measures both.
HISTORY_PAGE = 100
SEARCH_PAGE = 200        # runs per runs/search request


class MlflowError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code = status, code

    @property
    def transient(self) -> bool:
        return self.status in (408, 429) or self.status >= 500


def tracking_base(tracking_uri: str, allow_http: bool = False) -> str:
    """azureml://HOST/mlflow/v1.0/<scope> -> https://HOST/mlflow/v2.0/<scope>; plain http only towards a
    loopback host and only when allow_http (the backend talks to a loopback emulator, client.py)."""
    parts = urlsplit(tracking_uri.strip())
    path = parts.path
    i = path.lower().find("/subscriptions/")
    if not parts.netloc or i < 0:
        raise ValueError(f"not an Azure ML tracking URI: {tracking_uri}")
    scheme = "http" if allow_http and is_loopback_host(parts.hostname or "") and parts.scheme != "https" else "https"
    return f"{scheme}://{parts.netloc}/mlflow/v2.0{path[i:].rstrip('/')}"


def _point(m: dict) -> MetricPoint:
    return MetricPoint(step=int(m.get("step") or 0), value=float(m["value"]), timestamp=int(m.get("timestamp") or 0))


def rest_pipeline(base: str, credential, scope: str, *, retry_total: int, backoff: float, transport=None):
    """An azure-core pipeline for dtrain's own REST calls (MLflow, Azure Monitor): the backend's credential,
    azure-core's retries, and plain http only to a loopback endpoint (client.py)."""
    from azure.core import PipelineClient
    from azure.core.pipeline.policies import (BearerTokenCredentialPolicy, ContentDecodePolicy, RetryPolicy,
                                              UserAgentPolicy)

    from .client import _loopback_policy_class

    policies = [_loopback_policy_class()(), UserAgentPolicy(user_agent="dtrain"),
                RetryPolicy(retry_total=retry_total, retry_backoff_factor=backoff, retry_backoff_max=30),
                BearerTokenCredentialPolicy(credential, scope), ContentDecodePolicy()]
    kwargs = {"transport": transport} if transport is not None else {}
    return PipelineClient(base_url=base, policies=policies, **kwargs)


def response_json(resp) -> dict:
    """The answer's JSON object; {} for an empty or unparsable body (an error then says what it can)."""
    try:
        data = resp.json() if resp.content else {}
    except (ValueError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


class MlflowRest:
    """The few MLflow REST calls dtrain makes, on an azure-core pipeline with the backend's credential."""

    def __init__(self, base: str, credential, scope: str, *, retry_total: int = 5, backoff: float = 0.8,
                 transport=None):
        self.base = base
        self._client = rest_pipeline(base, credential, scope, retry_total=retry_total, backoff=backoff,
                                     transport=transport)
        self.requests = 0

    def _call(self, method: str, op: str, params: dict | None = None, body: dict | None = None) -> dict:
        from azure.core.rest import HttpRequest

        req = HttpRequest(method, self.base + API + op, params=params, json=body)
        self.requests += 1
        resp = self._client.send_request(req)
        data = response_json(resp)
        if resp.status_code >= 400:
            inner = data.get("error")
            err = inner if isinstance(inner, dict) else data
            raise MlflowError(resp.status_code, str(err.get("error_code") or err.get("code") or "Error"),
                              str(err.get("message") or resp.reason or ""))
        return data

    def get_run(self, run_id: str) -> dict:
        return self._call("GET", "runs/get", {"run_id": run_id}).get("run") or {}

    def history(self, run_id: str, key: str, page_token: str | None = None, max_results: int = HISTORY_PAGE) -> dict:
        params = {"run_id": run_id, "metric_key": key, "max_results": str(max_results)}
        if page_token:
            params["page_token"] = page_token
        return self._call("GET", "metrics/get-history", params)

    def search(self, experiment_ids: list, filter_: str | None, page_token: str | None = None,
               max_results: int = SEARCH_PAGE) -> dict:
        body: dict = {"experiment_ids": list(experiment_ids), "max_results": max_results}
        if filter_:
            body["filter"] = filter_
        if page_token:
            body["page_token"] = page_token
        return self._call("POST", "runs/search", body=body)

    def experiment_id(self, name: str) -> str | None:
        try:
            return (self._call("GET", "experiments/get-by-name", {"experiment_name": name}).get("experiment")
                    or {}).get("experiment_id")
        except MlflowError as exc:
            if exc.status == 404:
                return None
            raise


class RunMetrics:
    """One job's metrics, read incrementally (a MetricsReader)."""

    def __init__(self, rest: MlflowRest, run_id: str, keys=None):
        self.rest, self.run_id = rest, run_id
        self.keys = set(keys) if keys else None
        self.points: dict = {}
        self._latest: dict = {}      # key -> latest (step, timestamp, value) as of the last good read
        self._token: dict = {}       # key -> page token of the page the last read ended in
        self._seen: dict = {}        # key -> identities of the points of that page already returned

    def poll(self) -> dict:
        try:
            run = self.rest.get_run(self.run_id)
        except MlflowError as exc:
            if exc.status == 404:     # no run (yet): no metrics
                return {}
            raise
        new: dict = {}
        for m in (run.get("data") or {}).get("metrics") or []:
            key = m.get("key")
            if key is None or (self.keys is not None and key not in self.keys):
                continue
            mark = (m.get("step"), m.get("timestamp"), m.get("value"))
            if self._latest.get(key) == mark:
                continue
            pts = self._read(key)
            self._latest[key] = mark
            if pts:
                new[key] = sort_points(pts)
                self.points[key] = sort_points(self.points.get(key, []) + pts)
        return new

    def _read(self, key: str) -> list:
        """The points of `key` not returned yet: pages from the last page token on. Committed at the end."""
        token = self._token.get(key)
        seen = set(self._seen.get(key, ()))
        out = []
        while True:
            page = self.rest.history(self.run_id, key, token)
            ident = set()
            for m in page.get("metrics") or []:
                p = _point(m)
                i = (p.step, p.timestamp, p.value)
                ident.add(i)
                if i not in seen:
                    out.append(p)
            nxt = page.get("next_page_token")
            if not nxt:
                seen |= ident
                break
            token, seen = nxt, set()        # a full page is done: the next read starts past it
        self._token[key], self._seen[key] = token, seen
        return out


def latest_by_run(rest: MlflowRest, names: list, experiment_ids: list, state: dict) -> dict:
    """run id -> key -> latest MetricPoint for `names`, from runs/search (data.metrics holds each metric's
    latest value): one request for up to SEARCH_PAGE runs. Filtered on `attributes.run_id IN (...)`
    (MLflow >= 2.0); where the service refuses that filter (400), the experiments' runs are searched
    unfiltered, newest first, until every name is seen, and state["unfiltered"] remembers it."""
    wanted = set(names)
    out: dict = {}
    if not wanted or not experiment_ids:
        return out
    flt = None if state.get("unfiltered") else "attributes.run_id IN (" + ", ".join(
        "'" + n.replace("'", "") + "'" for n in sorted(wanted)) + ")"
    token = None
    while True:
        try:
            page = rest.search(experiment_ids, flt, token)
        except MlflowError as exc:
            if exc.status == 400 and flt:
                state["unfiltered"], flt, token = True, None, None
                continue
            raise
        for run in page.get("runs") or []:
            rid = (run.get("info") or {}).get("run_id")
            if rid in wanted:
                out[rid] = {m["key"]: _point(m) for m in (run.get("data") or {}).get("metrics") or [] if "key" in m}
        token = page.get("next_page_token")
        if not token or wanted <= set(out):
            return out
