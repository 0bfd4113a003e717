"""A local job's state.json as a typed, versioned record.

Every reader and writer of state.json goes through `JobRecord` (store.read_state / update_state): the
fields are named once here, with their types, instead of being looked up by string key. `schema` says
which layout wrote the file: a file without it is version 1's layout written before the field existed
(read as is); a file from a newer dtrain is refused as unreadable, with the version in the reason, rather
than half understood. Keys this version does not know are kept and written back unchanged.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SCHEMA = 1


class RecordError(ValueError):
    """state.json holds something that is not a job record (the reason says what)."""


@dataclass
class JobRecord:
    name: str
    status: str                               # a JobStatus value (status.py), dtrain's own ones included
    created: str                              # ISO 8601 with offset
    token: str                                # the marker every process of the job carries
    started: str | None = None
    ended: str | None = None
    experiment_name: str | None = None
    display_name: str | None = None
    description: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    archived: bool = False
    nodes: int = 1
    processes_per_node: int = 1
    framework: str | None = None
    instance_type: str | None = None          # resources.instance_type, as Azure would run it (dtrain why)
    plan_hash: str | None = None
    supervisor: dict[str, Any] | None = None  # {"pid", "start_time"} of the job's supervisor
    watchdog: dict[str, Any] | None = None    # the same, of the watchdog that outlives a lost supervisor
    submitter: dict[str, Any] | None = None   # the same, of the submit that will start the supervisor
    processes: list[dict[str, Any]] = field(default_factory=list)   # one per rank: pid, sid, rank, node, ...
    failure: dict[str, Any] | None = None     # failure.py's summary of why the job ended badly
    timed_out: bool = False
    cancel_requested: bool = False
    grace_s: float | None = None              # SIGTERM -> SIGKILL, recorded at submit
    ports: list[int] = field(default_factory=list)
    port_names: list[str] = field(default_factory=list)
    mpirun: str | None = None
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)   # keys a later version wrote; kept as they are

    @classmethod
    def from_dict(cls, raw: Any) -> JobRecord:
        _check(raw)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in raw.items() if k in known and v is not None}
        values["tags"] = {str(k): str(v) for k, v in (raw.get("tags") or {}).items()}
        values["processes"] = [p for p in raw.get("processes") or [] if isinstance(p, dict)]
        for key in ("ports", "port_names"):
            values[key] = raw[key] if isinstance(raw.get(key), list) else []
        values["nodes"] = raw.get("nodes") or 1
        values["processes_per_node"] = raw.get("processes_per_node") or 1
        values["schema"] = SCHEMA
        return cls(**values, extra={k: v for k, v in raw.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**self.extra, **out}

    @property
    def grace(self) -> float | None:
        """The recorded grace period, None when the job has none recorded (older jobs)."""
        g = self.grace_s
        return float(g) if isinstance(g, (int, float)) and not isinstance(g, bool) and g >= 0 else None


def _check(raw: Any) -> None:
    """RecordError unless `raw` is a job record this version can read."""
    if not isinstance(raw, dict):
        raise RecordError(f"holds a JSON {type(raw).__name__}, not an object")
    version = raw.get("schema", 1)
    if not isinstance(version, int) or version > SCHEMA:
        raise RecordError(f"was written by a newer dtrain (state schema {version}; this one reads {SCHEMA})")
    for key in ("status", "name", "created", "token"):
        if not isinstance(raw.get(key), str):
            raise RecordError(f"has no valid `{key}`")
    try:
        datetime.fromisoformat(raw["created"])
    except ValueError:
        raise RecordError("has no valid `created`") from None
    for key in ("supervisor", "watchdog", "submitter", "tags", "failure"):
        if not isinstance(raw.get(key) or {}, dict):
            raise RecordError(f"has no valid `{key}`")
