"""A local job's MLflow store: Azure ML's metrics contract, on this machine.

In an Azure ML job every process gets MLFLOW_TRACKING_URI (the workspace), MLFLOW_RUN_ID (= the job
name), MLFLOW_EXPERIMENT_ID and MLFLOW_EXPERIMENT_NAME, so `mlflow.start_run()` and
`mlflow.log_metric(...)` in any rank land in the job's one run. A local job gets the same variables,
pointing at an MLflow file store inside the job folder that submit creates with the experiment and
the run already in it (MLflow's own meta.yaml layout, written here without importing mlflow):

  mlruns/<experiment id>/meta.yaml                  the experiment (id, name)
  mlruns/<experiment id>/<job name>/meta.yaml       the run: run id = the job name, RUNNING
  mlruns/<experiment id>/<job name>/metrics/<key>   one line per point, "<timestamp ms> <value> <step>",
                                                    appended by mlflow in each rank (O_APPEND)

mlflow-skinny 3.x refuses a file store unless MLFLOW_ALLOW_FILE_STORE=true ("maintenance mode"), so
that is set too. dtrain reads the metric files itself (MetricsFiles): no mlflow import in dtrain.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from ..base import MetricPoint, sort_points

MLRUNS = "mlruns"
DEFAULT_EXPERIMENT = "Default"     # Azure ML's experiment for a job that names none


def experiment_id(experiment_name: str) -> str:
    """A GUID per experiment name, as Azure ML's experiment ids are (stable across local jobs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "dtrain-local-experiment:" + experiment_name))


def mlflow_env(job_dir: str, name: str, experiment_name: str | None) -> dict:
    """The MLflow variables each process of a local job gets (the names Azure ML sets in a job)."""
    exp = experiment_name or DEFAULT_EXPERIMENT
    return {
        "MLFLOW_TRACKING_URI": "file://" + str(Path(job_dir) / MLRUNS),
        "MLFLOW_RUN_ID": name,
        "MLFLOW_EXPERIMENT_ID": experiment_id(exp),
        "MLFLOW_EXPERIMENT_NAME": exp,
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }


def create(staging: Path, job_dir: str, name: str, experiment_name: str | None, now_ms: int) -> None:
    """Write the experiment and the run into `staging` (the job folder before its rename), with paths
    that name the final job folder."""
    import yaml

    exp = experiment_name or DEFAULT_EXPERIMENT
    eid = experiment_id(exp)
    root_uri = "file://" + str(Path(job_dir) / MLRUNS)
    run_dir = staging / MLRUNS / eid / name
    for sub in ("metrics", "params", "tags", "artifacts"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (staging / MLRUNS / ".trash").mkdir(exist_ok=True)
    experiment: dict = {"artifact_location": f"{root_uri}/{eid}", "creation_time": now_ms, "experiment_id": eid,
                  "last_update_time": now_ms, "lifecycle_stage": "active", "name": exp}
    run: dict = {"artifact_uri": f"{root_uri}/{eid}/{name}/artifacts", "end_time": None, "entry_point_name": "",
           "experiment_id": eid, "lifecycle_stage": "active", "run_id": name, "run_name": name,
           "run_uuid": name, "source_name": "", "source_type": 4, "source_version": "",
           "start_time": now_ms, "status": 1, "tags": [], "user_id": "dtrain"}   # status 1: RUNNING
    for path, data in ((staging / MLRUNS / eid / "meta.yaml", experiment), (run_dir / "meta.yaml", run)):
        path.write_text(yaml.safe_dump(data, sort_keys=True), encoding="utf-8")


def metrics_dirs(job_dir: Path, name: str) -> list[Path]:
    """The run's metrics folder(s): the run id is the job name, in whichever experiment a script chose."""
    root = Path(job_dir) / MLRUNS
    if not root.is_dir():
        return []
    return sorted(d / name / "metrics" for d in root.iterdir()
                  if not d.name.startswith(".") and (d / name / "metrics").is_dir())


def parse_line(line: str) -> MetricPoint | None:
    """`<timestamp> <value> <step>` (2, 3 or 5 fields, as MLflow's file store writes them)."""
    parts = line.split()
    if len(parts) not in (2, 3, 5):
        return None
    try:
        return MetricPoint(step=int(parts[2]) if len(parts) >= 3 else 0, value=float(parts[1]),
                           timestamp=int(parts[0]))
    except ValueError:
        return None


class MetricsFiles:
    """Reads a local job's metric files incrementally: an offset per file, complete lines only (a rank
    may be half-way through appending one), so a poll reads only the bytes it has not read."""

    def __init__(self, job_dir: Path, name: str, keys=None):
        self.job_dir, self.name = Path(job_dir), name
        self.keys = set(keys) if keys else None
        self.points: dict = {}
        self._offsets: dict = {}

    def _files(self):
        for mdir in metrics_dirs(self.job_dir, self.name):
            for dirpath, _, files in os.walk(mdir):
                for f in files:
                    path = Path(dirpath) / f
                    key = path.relative_to(mdir).as_posix()      # keys may hold '/'
                    if self.keys is None or key in self.keys:
                        yield key, path

    def poll(self) -> dict:
        new: dict = {}
        for key, path in self._files():
            off = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(off)
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            if not end:
                continue
            self._offsets[path] = off + end
            pts = [p for p in (parse_line(ln) for ln in data[:end].decode("utf-8", "replace").splitlines()) if p]
            if pts:
                new.setdefault(key, []).extend(pts)
        for key, pts in new.items():
            new[key] = sort_points(pts)
            self.points[key] = sort_points(self.points.get(key, []) + pts)
        return new


def latest(job_dir: Path, name: str, tail: int = 4096) -> dict:
    """key -> the point of the highest step (then newest) among the last lines of each metric file."""
    out: dict = {}
    for key, path in MetricsFiles(job_dir, name)._files():
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - tail))
                lines = f.read(tail).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        pts = [p for p in (parse_line(ln) for ln in (lines[1:] if size > tail else lines)) if p]
        if pts:
            out[key] = max(pts, key=lambda p: (p.step, p.timestamp))
    return out
