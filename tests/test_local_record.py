"""state.json is a typed, versioned record (backends/local/record.py): what each version reads, writes
back and refuses."""
import json

import pytest

from dtrain.backends.local.record import SCHEMA, JobRecord, RecordError
from dtrain.backends.local.store import CorruptState, read_state, update_state

# A state.json as dtrain wrote it before the record had a schema field (its layout is version 1's).
BEFORE_SCHEMA = {
    "name": "old", "status": "Completed", "created": "2026-01-01T00:00:00.000+00:00", "started": None,
    "ended": "2026-01-01T00:00:01.000+00:00", "token": "old:ab", "nodes": 2, "processes_per_node": 3,
    "tags": {"team": "vision", "n": 3}, "supervisor": {"pid": 1, "start_time": 5}, "processes": [{"rank": 0}],
    "failure": None, "timed_out": False, "cancel_requested": False, "grace_s": 5.0, "ports": [4000],
    "port_names": ["MASTER_PORT"], "plan_hash": "h", "framework": "pytorch",
}


def _job(tmp_path, raw) -> object:
    d = tmp_path / "job"
    d.mkdir(exist_ok=True)
    (d / "state.json").write_text(json.dumps(raw))
    return d


def test_a_state_written_before_the_schema_field_reads_and_is_written_back_versioned(tmp_path):
    d = _job(tmp_path, BEFORE_SCHEMA)
    rec = read_state(d)
    assert (rec.name, rec.status, rec.nodes, rec.processes_per_node) == ("old", "Completed", 2, 3)
    assert rec.tags == {"team": "vision", "n": "3"} and rec.supervisor == {"pid": 1, "start_time": 5}
    assert rec.grace == 5.0 and rec.archived is False and rec.watchdog is None
    update_state(d, lambda s: setattr(s, "archived", True))
    raw = json.loads((d / "state.json").read_text())
    assert raw["schema"] == SCHEMA and raw["archived"] is True and raw["ports"] == [4000]


def test_keys_this_version_does_not_know_are_kept(tmp_path):
    d = _job(tmp_path, {**BEFORE_SCHEMA, "sampling": {"every_s": 5}})
    update_state(d, lambda s: setattr(s, "status", "Failed"))
    raw = json.loads((d / "state.json").read_text())
    assert raw["sampling"] == {"every_s": 5} and raw["status"] == "Failed"


def test_a_state_from_a_newer_dtrain_is_unreadable_with_its_version(tmp_path):
    d = _job(tmp_path, {**BEFORE_SCHEMA, "schema": SCHEMA + 1})
    with pytest.raises(CorruptState, match=f"newer dtrain \\(state schema {SCHEMA + 1}"):
        read_state(d)


@pytest.mark.parametrize("raw, reason", [
    ([], "not an object"), ({**BEFORE_SCHEMA, "token": 3}, "`token`"),
    ({**BEFORE_SCHEMA, "created": "today"}, "`created`"), ({**BEFORE_SCHEMA, "watchdog": [1]}, "`watchdog`"),
])
def test_what_is_not_a_record(raw, reason):
    with pytest.raises(RecordError, match=reason):
        JobRecord.from_dict(raw)


def test_round_trip():
    rec = JobRecord(name="a", status="Queued", created="2026-01-01T00:00:00+00:00", token="a:1", nodes=2)
    assert JobRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
