"""metrics -o json/csv stream the document piece by piece (a job may log a million points: before, 1.47 GB
for -o json; see docs/benchmarks.md): the streamed text is exactly the documented document."""
from __future__ import annotations

import json
import math

from dtrain.backends.base import MetricPoint
from dtrain.metrics_view import CHUNK, csv_chunks, csv_text, json_chunks, to_json


def points(n, key_nan=False):
    vals = [1.0 / (i + 1) for i in range(n)]
    if key_nan:
        vals[3], vals[5] = math.nan, math.inf
    return [MetricPoint(i, v, 1_700_000_000_000 + i) for i, v in enumerate(vals)]


def test_streamed_json_is_the_document_and_strict_json():
    metrics = {"loss": points(2 * CHUNK + 7, key_nan=True), "rank10": points(3), "rank2": [], "lr": points(1)}
    text = "".join(json_chunks("job-1", metrics))
    doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))   # no NaN/Infinity
    assert doc == to_json("job-1", metrics)
    assert doc["metrics"]["loss"][3]["value"] is None and list(doc["metrics"]) == ["loss", "lr", "rank2", "rank10"]


def test_streamed_csv_is_the_csv():
    metrics = {"loss": points(CHUNK + 3), "acc": points(2)}
    assert "".join(csv_chunks("j", metrics)) == csv_text("j", metrics)
    assert "".join(csv_chunks("j", metrics, header=False)) == csv_text("j", metrics, header=False)


def test_a_point_holds_no_per_instance_dict():
    assert not hasattr(MetricPoint(1, 0.5, 2), "__dict__")        # slots: a million of them fit in memory
