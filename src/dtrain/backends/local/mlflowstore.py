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
import stat
import uuid
from pathlib import Path
from typing import Callable

from ..base import MetricPoint, sort_points
from ..safefile import NotRegularFile, open_regular, read_tail

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
    """The run's metrics folder(s): the run id is the job name, in whichever experiment a script chose.
    A folder reached through a symlink is not one (a job could point it anywhere)."""
    root = Path(job_dir) / MLRUNS
    if not root.is_dir() or root.is_symlink():
        return []
    out = []
    for d in root.iterdir():
        parts = (d, d / name, d / name / "metrics")
        if not d.name.startswith(".") and all(_is_real_dir(p) for p in parts):
            out.append(parts[-1])
    return sorted(out)


def _is_real_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


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
    may be half-way through appending one), so a poll reads only the bytes it has not read. Only regular
    files are read, CHUNK bytes at a time and no further than the size they had when opened: an entry
    that is a FIFO, a device or a symlink (to /dev/zero, say) is skipped, and on_skip(text) told once."""

    CHUNK = 1024 * 1024

    def __init__(self, job_dir: Path, name: str, keys=None, on_skip: Callable[[str], None] | None = None):
        self.job_dir, self.name = Path(job_dir), name
        self.keys = set(keys) if keys else None
        self.points: dict = {}
        self.skipped: dict = {}          # path -> why it is not read
        self.on_skip = on_skip
        self._offsets: dict = {}

    def _files(self):
        for mdir in metrics_dirs(self.job_dir, self.name):
            for dirpath, _, files in os.walk(mdir):
                for f in files:
                    path = Path(dirpath) / f
                    key = path.relative_to(mdir).as_posix()      # keys may hold '/'
                    if self.keys is None or key in self.keys:
                        yield key, path

    def skip(self, path: Path, exc: NotRegularFile) -> None:
        if path not in self.skipped:
            self.skipped[path] = exc.kind
            if self.on_skip:
                self.on_skip(f"metric file {path} is {exc.kind}, not a regular file: skipped")

    def _read_new(self, path: Path) -> list[MetricPoint]:
        """The points in the complete lines after the last offset read, up to the file's size now."""
        off = self._offsets.get(path, 0)
        pts: list[MetricPoint] = []
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(off)
            while off < size:
                data = f.read(min(self.CHUNK, size - off))
                end = data.rfind(b"\n") + 1
                if not data or (not end and len(data) < self.CHUNK):
                    break                    # the last line is not complete yet
                if not end:                  # one line longer than CHUNK: not a point; pass over it
                    end = len(data)
                pts += [p for p in map(parse_line, data[:end].decode("utf-8", "replace").splitlines()) if p]
                off += end
                f.seek(off)
        self._offsets[path] = off
        return pts

    def poll(self) -> dict:
        new: dict = {}
        for key, path in self._files():
            try:
                pts = self._read_new(path)
            except NotRegularFile as exc:
                self.skip(path, exc)
                continue
            except OSError:
                continue
            if pts:
                new.setdefault(key, []).extend(pts)
        for key, pts in new.items():
            new[key] = sort_points(pts)
            self.points[key] = sort_points(self.points.get(key, []) + pts)
        return new


def latest(job_dir: Path, name: str, tail: int = 4096, on_skip: Callable[[str], None] | None = None) -> dict:
    """key -> the point of the highest step (then newest) among the last lines of each metric file."""
    out: dict = {}
    reader = MetricsFiles(job_dir, name, on_skip=on_skip)
    for key, path in reader._files():
        try:
            data, size = read_tail(path, tail)
        except NotRegularFile as exc:
            reader.skip(path, exc)
            continue
        except OSError:
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        pts = [p for p in (parse_line(ln) for ln in (lines[1:] if size > tail else lines)) if p]
        if pts:
            out[key] = max(pts, key=lambda p: (p.step, p.timestamp))
    return out
