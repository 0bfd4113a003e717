"""A job's interactive services (TensorBoard, SSH, JupyterLab, VS Code, custom) as the job resource reports
them: the REST spec's JobService (jobServiceType, endpoint, port, status, errorMessage). The service adds
Tracking (the MLflow URI) and Studio (JobInfo.url) to every job; those are not the user's services."""
from __future__ import annotations

_SERVICE_ADDED = ("Tracking", "Studio")


def job_services(props: dict) -> dict | None:
    """name -> {type, endpoint, port, status, error} with what is reported (None where there are none)."""
    out = {}
    for name, svc in (props.get("services") or {}).items():
        svc = svc if isinstance(svc, dict) else {}
        kind = svc.get("jobServiceType") or name
        if name in _SERVICE_ADDED or kind in _SERVICE_ADDED:
            continue
        fields = {"type": kind, "endpoint": svc.get("endpoint"), "port": svc.get("port"), "status": svc.get("status"),
                  "error": svc.get("errorMessage")}
        out[name] = {k: v for k, v in fields.items() if v is not None}
    return out or None
