"""The scaling report's arithmetic and rendering (dtrain.scale), on made-up metric points: no job runs."""
from __future__ import annotations

import json
from collections import namedtuple

import pytest

from dtrain import scale

# the shape of backends.base.MetricPoint (step, value, timestamp in ms), all the report reads
MetricPoint = namedtuple("MetricPoint", "step value timestamp")


def pts(values, first_step=1, every=10):
    """Points as the shipped scripts log them: step 1 (one step after start), then every `every` steps."""
    steps = [first_step] + [every * i for i in range(1, len(values))]
    return [MetricPoint(step=s, value=v, timestamp=1_700_000_000_000 + s) for s, v in zip(steps, values)]


def test_steady_mean_leaves_out_the_first_point_and_the_first_fifth():
    # steps 1, 10..100: the cut is at 1 + 0.2 * 99 = 20.8, so 1, 10 and 20 are warm-up
    p = pts([5.0, 50.0, 90.0, 100, 100, 100, 100, 110, 90, 100, 100])
    s = scale.steady_mean(p)
    assert s.skipped == 3 and s.points == 8
    assert s.mean == pytest.approx(100.0)


def test_steady_mean_of_a_short_run_uses_what_follows_the_first_point():
    s = scale.steady_mean(pts([1.0, 80.0]))        # steps 1 and 10: 10 > 1 + 0.2*9, kept
    assert (s.mean, s.points, s.skipped) == (80.0, 1, 1)
    one = scale.steady_mean(pts([42.0]))
    assert (one.mean, one.points, one.steady) == (42.0, 1, False)
    assert scale.steady_mean([]) is None


def test_steady_mean_orders_points_by_step():
    p = list(reversed(pts([1.0, 10.0, 20.0, 30.0, 40.0, 50.0])))
    assert scale.steady_mean(p).mean == pytest.approx(scale.steady_mean(list(reversed(p))).mean)


def test_efficiency_is_measured_over_ideal_linear_against_the_smallest_run():
    runs = [(2, 4, "b", "Completed", pts([1, 300, 300, 300, 300, 300])),     # 75 per process
            (1, 2, "a", "Completed", pts([1, 200, 200, 200, 200, 200])),     # 100 per process: the base
            (4, 8, "c", "Completed", pts([1, 480, 480, 480, 480, 480]))]     # 60 per process
    rs = scale.rows(runs)
    assert [r.nodes for r in rs] == [1, 2, 4]
    assert [r.throughput for r in rs] == pytest.approx([200, 300, 480])
    assert [r.throughput_per_process for r in rs] == pytest.approx([100, 75, 60])
    assert [r.efficiency for r in rs] == pytest.approx([1.0, 0.75, 0.6])
    assert scale.first_below(rs).nodes == 2
    assert scale.verdict(rs) == ("efficiency falls under 80% at 2 nodes (4 processes: 75%); "
                                 "last at or above it: 1 node")


def test_verdict_when_efficiency_holds_and_when_a_run_has_no_metric():
    rs = scale.rows([(1, 1, "a", "Completed", pts([1, 10, 10, 10])),
                     (2, 2, "b", "Completed", pts([1, 19, 19, 19]))])
    assert rs[1].efficiency == pytest.approx(0.95)
    assert scale.verdict(rs) == "efficiency stays at or above 80% up to 2 nodes (2 processes)"
    missing = scale.rows([(1, 1, "a", "Completed", pts([1, 10, 10])), (2, 2, "b", "Failed", [])])
    assert missing[1].throughput is None and missing[1].efficiency is None
    assert scale.verdict(missing) == "efficiency needs at least two runs with the metric"


def test_the_base_is_the_smallest_run_that_logged_the_metric():
    rs = scale.rows([(1, 1, "a", "Failed", []), (2, 2, "b", "Completed", pts([1, 20, 20])),
                     (4, 4, "c", "Completed", pts([1, 30, 30]))])
    assert rs[1].efficiency == pytest.approx(1.0) and rs[2].efficiency == pytest.approx(0.75)


def test_table_and_plot_show_every_run():
    rs = scale.rows([(1, 2, "job-a", "Completed", pts([1, 200, 200, 200])),
                     (2, 4, "job-b", "Completed", pts([1, 300, 300, 300])),
                     (4, 8, "job-c", "Failed", [])])
    t = scale.table(rs, "samples_per_s")
    assert t[0].split() == ["nodes", "processes", "samples_per_s", "samples_per_s/process", "efficiency",
                            "points", "job"]
    assert t[1].split()[:5] == ["1", "2", "200.0", "100.0", "100%"]
    assert t[2].split()[:5] == ["2", "4", "300.0", "75.0", "75%"]
    assert "job-c (Failed)" in t[3] and t[3].split()[2] == "-"
    p = scale.plot(rs, width=20)
    assert p[1] == " 1 node |" + "█" * 20 + "| 100%"
    assert p[2] == "2 nodes |" + "█" * 15 + " |" + " " * 3 + "| 75%"      # the 80% mark at column 16
    assert p[3].endswith("|   -")
    over = scale.plot(scale.rows([(1, 1, "a", "Completed", pts([1, 10, 10])),
                                  (2, 2, "b", "Completed", pts([1, 24, 24]))]), width=10)
    assert over[2] == "2 nodes |" + "█" * 10 + "|" + "█" * 2 + " 120%"


def test_report_is_json_ready():
    rs = scale.rows([(1, 1, "a", "Completed", pts([1, 10, 10])), (2, 2, "b", "Completed", pts([1, 10, 10]))])
    doc = json.loads(json.dumps(scale.report(rs, "samples_per_s")))
    assert doc["metric"] == "samples_per_s" and doc["warmup_fraction"] == 0.2
    assert doc["first_below_threshold"] == {"nodes": 2, "processes": 2, "efficiency": 0.5}
    assert [r["efficiency"] for r in doc["rows"]] == [1.0, 0.5]
