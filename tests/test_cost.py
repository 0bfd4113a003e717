"""What a job costs (docs/capacity.md): the shipped price snapshot against dtrain's VM size table, the Retail
Prices API client against the emulator's pages (paging, cache, faults), `dtrain cost`, `submit --max-cost` and
the dry-run line (in process), and the cost of an ended job from its measured run time. No SDK: fast."""
from __future__ import annotations

import csv
import json
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from azure_emulator import AzureMLEmulator
from azure_emulator.capacity import vm_meters
from dtrain import prices
from dtrain.backends.base import JobInfo
from dtrain.cost import job_cost
from dtrain.spec.vmsizes import lookup
from fakes import run_main

TEMPLATE = str(Path(__file__).resolve().parents[1] / "job_templates" / "pytorch-ddp.yml")
A100 = "Standard_ND96amsr_A100_v4"      # in the snapshot: eastus 32.77 USD/h (SkyPilot catalog a7fff17)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("DTRAIN_PRICES_OFFLINE", "1")      # a test that asks the API points it at the emulator


@pytest.fixture
def spec(tmp_path):
    """The PyTorch DDP template on A100 nodes (a size the snapshot prices), 2 nodes, no time limit."""
    text = Path(TEMPLATE).read_text()
    p = tmp_path / "job.yml"
    p.write_text(text.replace("code: ../training_scripts", "code: .").replace("Standard_ND96isr_H100_v5", A100))
    return str(p)


# --- the snapshot -----------------------------------------------------------------------------------
def test_snapshot_names_its_source_and_agrees_with_the_vm_size_table():
    src = prices.snapshot_source()
    assert src["repository"] == "https://github.com/skypilot-org/skypilot-catalog"
    assert src["path"] == "catalogs/v5/azure/az_ml_vms.csv" and len(src["commit"]) == 40
    assert date.fromisoformat(src["retrieved"])
    rows = list(csv.DictReader((resources.files("dtrain") / "data" / "prices.csv").read_text().splitlines()))
    assert len(rows) > 50
    for r in rows:
        assert lookup(r["vm_size"]) is not None and lookup(r["vm_size"]).name == r["vm_size"], r
        assert float(r["price_per_hour"]) > 0, r
    # the catalog says 12 GPUs for ND96isr_H100_v5 (dtrain's table: 8): the GPU count is corrected, never
    # used; its prices stay, but westus2's 0.0 (SkyPilot's fill for a missing price) is dropped
    h100 = {r["region"]: r for r in rows if r["vm_size"] == "Standard_ND96isr_H100_v5"}
    assert sorted(h100) == ["eastus", "eastus2", "westus"] and h100["eastus"]["price_per_hour"] == "98.32"
    assert any(c.startswith("Standard_ND96isr_H100_v5 ") and "12" in c for c in src["corrected"])
    assert any(d.startswith("Standard_ND96isr_H100_v5 westus2:") for d in src["dropped"])
    # a spot figure that is no discount (the H100 rows repeat their price there) is no spot price
    assert all(not r["spot_price_per_hour"] or float(r["spot_price_per_hour"]) < float(r["price_per_hour"])
               for r in rows) and h100["eastus"]["spot_price_per_hour"] == ""


def test_offline_price_comes_from_the_snapshot_with_its_date():
    found = prices.find(A100.lower(), "eastus")
    assert found.price.per_hour == 32.77 and found.price.vm_size == A100
    assert "SkyPilot catalog a7fff17" in found.price.source and found.price.as_of == prices.snapshot_source()["retrieved"]
    h100 = prices.find("Standard_ND96isr_H100_v5", "eastus")
    assert h100.price.per_hour == 98.32 and h100.notes == []
    none = prices.find("Standard_ND96isr_H100_v5", "westus2")
    assert none.price is None and "Price is 0.0" in none.notes[0]
    low = prices.find("Standard_ND96isr_H100_v5", "eastus", "low_priority")
    assert low.price is None and "no low priority price" in low.notes[0]


def test_cost_of_the_template_offline_prints_the_snapshots_price_and_when_it_was_copied(capsys):
    code, out, err = run_main(capsys, "cost", TEMPLATE, "--hours", "1")
    assert code == 0, err
    assert out.startswith("2 x Standard_ND96isr_H100_v5 x 1 h (--hours) in eastus at $98.32/h per node "
                          "(snapshot: SkyPilot catalog a7fff17, copied 2026-11-25, ")
    assert out.rstrip().endswith("= $196.64")
    job = json.loads(run_main(capsys, "cost", TEMPLATE, "--hours", "1", "-o", "json")[1])["jobs"][0]
    assert (job["total"], job["price"]["as_of"]) == (196.64, "2026-11-25")


# --- the Retail Prices API, against the emulator's pages ----------------------------------------------
@pytest.fixture
def retail(monkeypatch):
    with AzureMLEmulator() as emu:
        emu.capacity.prices = vm_meters("Standard_ND96isr_H100_v5", "eastus", 98.32, windows=120.5,
                                        low_priority=19.66, spot=9.83)
        monkeypatch.setenv("DTRAIN_PRICES_URL", emu.url + "/api/retail/prices")
        monkeypatch.delenv("DTRAIN_PRICES_OFFLINE")
        yield emu


def test_api_pages_to_the_linux_meter_then_the_cache_answers(retail):
    found = prices.find("Standard_ND96isr_H100_v5", "eastus", online=True)
    assert found.price.per_hour == 98.32 and found.price.source == "Azure Retail Prices API"
    pages = retail.requests_to(r"^/api/retail/prices$")
    assert len(pages) == 2 and pages[1].query["$skip"] == "2"                   # NextPageLink followed
    assert "armSkuName eq 'Standard_ND96isr_H100_v5'" in pages[0].query["$filter"]
    low = prices.find("Standard_ND96isr_H100_v5", "eastus", "low_priority", online=True)
    assert low.price.per_hour == 19.66
    before = len(retail.requests)
    again = prices.find("Standard_ND96isr_H100_v5", "eastus", online=True)
    assert again.price == found.price and len(retail.requests) == before        # from $DTRAIN_HOME's cache


def test_api_failure_falls_back_to_the_snapshot_and_says_why(retail):
    retail.fail(r"^/api/retail/prices$", 503, count=None)
    found = prices.find(A100, "eastus", online=True)
    assert found.price.per_hour == 32.77 and "SkyPilot" in found.price.source
    assert "could not be read" in found.notes[0]


def test_cost_of_the_template_prints_price_hours_total_and_date(retail, capsys):
    code, out, err = run_main(capsys, "cost", TEMPLATE, "--hours", "1")
    assert code == 0, err
    assert "2 x Standard_ND96isr_H100_v5 x 1 h (--hours) in eastus at $98.32/h per node" in out
    assert "Azure Retail Prices API" in out and date.today().isoformat() in out and out.rstrip().endswith("= $196.64")
    code, out, _ = run_main(capsys, "cost", TEMPLATE, "--hours", "1", "-o", "json")
    job = json.loads(out)["jobs"][0]
    assert (job["price_per_hour"], job["nodes"], job["hours"], job["total"]) == (98.32, 2, 1.0, 196.64)
    assert json.loads(out)["total"] == 196.64 and job["price"]["age_days"] == 0


# --- dtrain cost, --max-cost, the dry-run line (offline, in process) ---------------------------------------
def test_cost_json_carries_the_same_numbers_as_the_text(spec, capsys):
    code, out, err = run_main(capsys, "cost", spec, "--hours", "1.5")
    assert code == 0 and "2 x Standard_ND96amsr_A100_v4 x 1.5 h (--hours) in eastus at $32.77/h" in out
    assert "= $98.31" in out and ("days old" in out or "today" in out)
    code, out, _ = run_main(capsys, "cost", spec, "--hours", "1.5", "-o", "json")
    assert json.loads(out)["total"] == round(32.77 * 2 * 1.5, 2)


def test_cost_needs_a_run_time_and_does_not_guess(spec, capsys):
    code, _, err = run_main(capsys, "cost", spec)
    assert code == 2 and "no limits.timeout" in err and "--hours" in err
    code, out, _ = run_main(capsys, "cost", spec, "--set", "limits.timeout=7200", "--region", "southcentralus")
    assert code == 0 and "x 2 h (limits.timeout) in southcentralus at $39.32/h" in out


def test_cost_of_a_grid_sums_its_combinations(spec, capsys):
    code, out, err = run_main(capsys, "cost", spec, "--hours", "2", "--matrix", "inputs.lr=0.1,0.2",
                              "--matrix", "resources.instance_count=1,2", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert sorted(j["total"] for j in doc["jobs"]) == [65.54, 65.54, 131.08, 131.08]
    assert doc["total"] == 393.24
    code, out, _ = run_main(capsys, "cost", spec, "--hours", "2", "--matrix", "inputs.lr=0.1,0.2",
                            "--matrix", "resources.instance_count=1,2")
    assert "total: $393.24 for 4 jobs" in out


def test_max_cost_below_the_estimate_submits_nothing(spec, fake_backend, capsys):
    local = ["--set", "compute=local", "--set", "limits.timeout=3600"]
    code, _, err = run_main(capsys, "submit", spec, *local, "--max-cost", "50")
    assert code == 2 and "$65.54, above --max-cost 50" in err and "nothing was submitted" in err
    assert fake_backend.jobs == {}
    code, _, err = run_main(capsys, "submit", spec, *local, "--matrix", "inputs.lr=0.1,0.2", "--max-cost", "100")
    assert code == 2 and "the grid of 2 jobs would cost up to $131.08" in err and fake_backend.jobs == {}
    code, _, err = run_main(capsys, "submit", spec, *local, "--max-cost", "70", "--retries", "1", "--name", "c")
    assert code == 2 and "the retry chain (2 attempts at most) would cost up to $131.08" in err
    assert fake_backend.jobs == {}
    code, out, err = run_main(capsys, "submit", spec, *local, "--max-cost", "70")
    assert code == 0 and len(fake_backend.jobs) == 1, err


def test_max_cost_without_a_known_price_refuses(spec, fake_backend, capsys):
    code, _, err = run_main(capsys, "submit", spec, "--set", "compute=local", "--set", "limits.timeout=60",
                            "--set", "resources.instance_type=Standard_ND96isr_H200_v5", "--max-cost", "1000")
    assert code == 2 and "not known" in err and "dtrain cost" in err and fake_backend.jobs == {}


def test_dry_run_says_what_the_job_may_cost(spec, capsys):
    code, out, err = run_main(capsys, "submit", spec, "--set", "limits.timeout=1800", "--dry-run")
    assert code == 0 and "cost: up to 2 x Standard_ND96amsr_A100_v4 x 0.5 h (limits.timeout)" in err
    assert "= $32.77" in err and "type: command" in out


# --- after the job ------------------------------------------------------------------------------------
def _info(**kw) -> JobInfo:
    base = dict(name="j", backend="azureml", status="Completed", nodes=2, instance_type=A100,
                started="2026-01-01T10:00:00+00:00", ended="2026-01-01T10:30:00+00:00")
    return JobInfo(**{**base, **kw})


def test_an_ended_job_costs_price_x_nodes_x_its_run_time():
    c = job_cost(_info())
    assert c["seconds"] == 1800 and c["total"] == round(32.77 * 2 * 0.5, 2) and c["local"] is False
    assert job_cost(_info(ended=None)) is None and job_cost(_info(instance_type=None)) is None
    local = job_cost(_info(backend="local", started="2026-01-01T10:00:00Z", ended="2026-01-01T10:00:36Z"))
    assert local["local"] is True and local["total"] == round(32.77 * 2 * 36 / 3600, 2)


def test_a_retry_chain_costs_each_attempt_and_their_sum():
    attempts = [{"attempt": 1, "name": "c", "started": "2026-01-01T10:00:00Z", "ended": "2026-01-01T11:00:00Z"},
                {"attempt": 2, "name": "c-r1", "started": "2026-01-01T11:05:00Z", "ended": "2026-01-01T11:35:00Z"}]
    c = job_cost(_info(chain={"attempts": attempts}))
    assert [a["total"] for a in c["attempts"]] == [65.54, 32.77] and c["total"] == 98.31


def test_status_of_an_ended_local_job_shows_its_cost_marked_as_local(fake_backend, capsys):
    fake_backend.add(_info(backend="local", status="Completed"))
    code, out, err = run_main(capsys, "status", "j")
    assert code == 0 and "cost: $32.77 if run on Azure ML (local run)" in err
    code, out, _ = run_main(capsys, "status", "j", "-o", "json")
    assert json.loads(out)["cost"]["total"] == 32.77


def test_a_scaling_study_costs_each_run(spec):
    from dtrain import scale

    class Metrics:                                 # the runner's one call measure makes: no metric logged
        def metrics(self, name, keys=None):
            return {}

    g = scale.study(spec, [1, 2])
    final = {m.name: _info(name=m.name, nodes=m.spec.instance_count) for m in g.members}
    rs = scale.measure(Metrics(), g, final, "samples_per_s", 0.2)
    assert [(r.nodes, r.cost["total"]) for r in rs] == [(1, 16.39), (2, 32.77)]
    assert rs[1].to_dict()["cost"]["seconds"] == 1800


@pytest.mark.slow
def test_a_local_job_shows_what_it_would_cost_on_its_vm_size(cli, write):
    """A real local job (one process, `echo`): its record keeps the VM size it stands for, and its cost is
    that size's price x nodes x its measured run time, marked as a local run."""
    job = write("job.yml", "command: echo hi\nenvironment: azureml:env@latest\ncompute: local\n"
                           "resources:\n  instance_count: 1\n  instance_type: Standard_NC8as_T4_v3\n")
    r = cli("submit", job, "--wait", "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    from dtrain.cost import run_seconds

    secs = run_seconds(doc["started"], doc["ended"])
    assert doc["instance_type"] == "Standard_NC8as_T4_v3" and doc["cost"]["local"] is True
    assert doc["cost"]["seconds"] == round(secs, 3) and doc["cost"]["total"] == round(0.752 * secs / 3600, 2)
    s = cli("status", doc["name"])
    assert "if run on Azure ML (local run)" in s.stderr and "at $0.752/h in eastus" in s.stderr


def test_a_grid_shows_its_total_cost_and_each_combinations(spec, fake_backend, capsys):
    """The fake backend ends each job at once; each is then given a VM size, 2 nodes and 30 minutes of run."""
    fake_backend.script = ("Completed",)
    code, out, err = run_main(capsys, "submit", spec, "--set", "compute=local", "--matrix", "inputs.lr=0.1,0.2",
                              "--name", "g", "--wait", "-o", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 2
    for info in fake_backend.jobs.values():
        info.started, info.ended = "2026-01-01T10:00:00Z", "2026-01-01T10:30:00Z"
        info.instance_type, info.nodes = A100, 2
    code, out, err = run_main(capsys, "status", "g", "-o", "json")
    assert [j["cost"]["total"] for j in json.loads(out)] == [32.77, 32.77]
    code, out, err = run_main(capsys, "status", "g")
    assert "cost: $65.54 in total for 2 ended jobs" in err


def test_an_unknown_price_is_one_short_line_at_the_end_of_a_job():
    """The end of every job on a VM size without a price (ND96isr H200 v5, for one) says so in one
    line and points at `dtrain cost`, which says why; it does not paste the catalog's reasons."""
    from dtrain.cost import cost_text

    text = cost_text({"price": None, "notes": ["the shipped snapshot has no price for X: " + "why " * 40]})
    assert text.startswith("unknown: ") and "dtrain cost" in text and "why why" not in text and len(text) < 110
