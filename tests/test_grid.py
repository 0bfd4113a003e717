"""Matrix submission, the library part (dtrain.grid): parsing, the cross product, names, validation of
every combination before anything is sent, and throttled submission over a fake backend registered the real way (our
own logic only; real jobs: test_grid_local.py, Azure: test_grid_azure.py)."""
from __future__ import annotations

import re

import pytest

from dtrain import follow, grid
from dtrain.errors import BackendError, SpecError, UsageError
from dtrain.runner import Runner
from dtrain.spec.schema import JOB_NAME_PATTERN

SPEC = """\
command: python train.py --lr ${{inputs.lr}} --epochs ${{inputs.epochs}}
environment: azureml:env@latest
compute: local
inputs: {lr: 0.01, epochs: 1}
resources: {instance_count: 1}
distribution: {type: pytorch, process_count_per_instance: 2}
"""


def test_parse_matrix_keeps_order_and_values_as_written():
    axes = grid.parse_matrix(["inputs.lr=0.1,0.01", "inputs.epochs=1,2,3"])
    assert axes == [grid.Axis("inputs.lr", ("0.1", "0.01")), grid.Axis("inputs.epochs", ("1", "2", "3"))]


@pytest.mark.parametrize("bad,words", [
    ("inputs.lr", "has no '='"), ("=1,2", "empty path"), ("inputs.lr=", "empty value"),
    ("inputs.lr=1,,2", "empty value"), ("inputs.lr=1,1", "1 given twice"),
])
def test_parse_matrix_refuses_bad_flags(bad, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        grid.parse_matrix([bad])


def test_the_same_path_twice_is_refused():
    with pytest.raises(UsageError, match="given twice"):
        grid.parse_matrix(["inputs.lr=1", "inputs.lr=2"])


def test_cross_product_first_flag_varies_slowest():
    combos = grid.combinations(grid.parse_matrix(["a=1,2", "b=x,y,z"]))
    assert combos == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "1", "b": "z"},
                      {"a": "2", "b": "x"}, {"a": "2", "b": "y"}, {"a": "2", "b": "z"}]


def test_member_names_are_valid_stable_and_unique():
    combos = grid.combinations(grid.parse_matrix(["inputs.lr=0.1,0.01", "inputs.epochs=1,2"]))
    names = [grid.member_name("sweep", c) for c in combos]
    assert len(set(names)) == 4
    assert all(re.fullmatch(JOB_NAME_PATTERN, n) for n in names)
    assert names[0].startswith("sweep-0_1-1-")
    # the name depends on the combination only: not on the order of the flags or on the other values
    assert grid.member_name("sweep", {"inputs.epochs": "1", "inputs.lr": "0.1"}).rsplit("-", 1)[1] == \
        names[0].rsplit("-", 1)[1]
    assert grid.combinations(grid.parse_matrix(["inputs.lr=0.1,0.5", "inputs.epochs=1"]))[0] == combos[0]


def test_member_names_respect_the_length_limit():
    long_value = {"inputs.tag": "x" * 300}
    n = grid.member_name("g" * 200, long_value)
    assert len(n) <= 255 and re.fullmatch(JOB_NAME_PATTERN, n)
    odd = grid.member_name("g", {"inputs.path": "/a b/c.txt"})
    assert re.fullmatch(JOB_NAME_PATTERN, odd)
    with pytest.raises(UsageError, match="too long"):
        grid.member_name("g" * 250, {"a": "1"})


def test_build_grid_validates_and_tags_every_combination(write):
    spec = write("job.yml", SPEC)
    g = grid.build_grid(str(spec), ["inputs.epochs=3"], ["inputs.lr=0.1,0.2", "resources.instance_count=1,2"],
                        name="lrs")
    assert g.group == "lrs" and len(g.members) == 4
    m = g.members[3]
    assert m.combination == {"inputs.lr": "0.2", "resources.instance_count": "2"}
    assert m.spec.data["inputs"]["lr"] == 0.2 and m.spec.instance_count == 2
    assert m.spec.data["inputs"]["epochs"] == 3             # the command's own --set applies to every one
    assert g.tags(m) == {"dtrain.group": "lrs", "dtrain.matrix.inputs.lr": "0.2",
                         "dtrain.matrix.resources.instance_count": "2"}


def test_one_invalid_combination_fails_the_grid_with_every_problem(write):
    spec = write("job.yml", SPEC)
    with pytest.raises(SpecError) as exc:
        grid.build_grid(str(spec), [], ["resources.instance_count=1,0,-3", "inputs.lr=0.1,0.2"], name="g")
    msgs = [d.message for d in exc.value.diagnostics if d.severity == "error"]
    # 2 bad counts x 2 learning rates: each problem once per combination, labelled with its values
    assert len(msgs) == 4
    assert sum("[resources.instance_count=0, inputs.lr=0.1]" in m for m in msgs) == 1
    assert sum("[resources.instance_count=-3, inputs.lr=0.2]" in m for m in msgs) == 1
    assert exc.value.message.startswith("4 of 6 combinations invalid")


def test_group_name_comes_from_name_then_the_spec_then_is_generated(write):
    spec = write("job.yml", SPEC)
    assert grid.build_grid(str(spec), ["name=from-spec"], ["inputs.lr=1"]).group == "from-spec"
    a = grid.build_grid(str(spec), [], ["inputs.lr=1"]).group
    b = grid.build_grid(str(spec), [], ["inputs.lr=1"]).group
    assert a != b and re.fullmatch(JOB_NAME_PATTERN, a)


def test_a_missing_spec_is_said_once(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        grid.build_grid(str(tmp_path / "nope.yml"), [], ["inputs.lr=1,2"])


def test_local_default_parallelism_fits_the_processes_on_the_cpus(write):
    g = grid.build_grid(str(write("job.yml", SPEC)), [], ["resources.instance_count=1,2"], name="g")
    # the biggest member has 2 nodes x 2 processes
    assert grid.default_max_parallel(g, local=True, cpus=16) == 4
    assert grid.default_max_parallel(g, local=True, cpus=2) == 1
    assert grid.default_max_parallel(g, local=False, cpus=2) is None


# --- throttled submission, over a fake session (our own logic) --------------------------------------

def small_grid(write, n=4):
    return grid.build_grid(str(write("job.yml", SPEC)), [], [f"inputs.lr={','.join(str(i) for i in range(n))}"],
                           name="g")


def run(g, *, max_parallel, wait, sleep=lambda _: None):
    return list(Runner().run_grid(g, local=True, max_parallel=max_parallel, wait=wait, sleep=sleep))


def test_at_most_k_jobs_in_flight_and_every_one_followed_to_the_end(write, fake_backend):
    g = small_grid(write, 5)
    fake_backend.script = ["Queued", "Running", "Running", "Completed"]
    fake_backend.scripts[g.members[2].name] = ["Queued", "Running", "Failed"]
    events = run(g, max_parallel=2, wait=True)
    assert fake_backend.max_active == 2
    assert fake_backend.submitted == [m.name for m in g.members]           # each once, in the grid's order
    end = events[-1]
    assert isinstance(end, follow.Ended) and set(end.infos) == set(fake_backend.submitted)
    assert [end.infos[m.name].status for m in g.members] == ["Completed", "Completed", "Failed", "Completed",
                                                              "Completed"]
    assert [type(e) for e in events].count(follow.Submitted) == 5
    assert all(fake_backend.jobs[m.name].tags == g.tags(m) for m in g.members)


def test_without_wait_it_returns_once_the_last_job_is_submitted(write, fake_backend):
    g = small_grid(write, 3)
    fake_backend.script = ["Queued", "Running", "Running", "Completed"]
    events = run(g, max_parallel=1, wait=False)
    assert fake_backend.submitted == [m.name for m in g.members]
    assert not events[-1].infos[g.members[-1].name].terminal          # not waited for
    assert fake_backend.jobs[g.members[0].name].terminal              # the first had to end for the second


def test_a_failed_submit_is_asked_again_under_the_same_name(write, fake_backend):
    g = small_grid(write, 2)
    first = g.members[0].name
    fake_backend.fail_submits[first] = 2
    slept = []
    events = run(g, max_parallel=None, wait=True, sleep=slept.append)
    assert fake_backend.submit_calls == [first, first, first, g.members[1].name]
    retries = [e for e in events if isinstance(e, follow.Retrying)]
    assert [r.delay_s for r in retries] == [2.0, 4.0] and slept[:2] == [2.0, 4.0]
    assert fake_backend.submitted == [first, g.members[1].name]


def test_a_submit_that_keeps_failing_says_how_to_resume(write, fake_backend):
    g = small_grid(write, 2)
    fake_backend.fail_submits[g.members[1].name] = 99
    with pytest.raises(BackendError, match="after 6 tries") as exc:
        run(g, max_parallel=None, wait=True)
    assert "--name g" in exc.value.hint


def test_a_warning_every_combination_has_is_shown_once(write):
    spec = write("job.yml", SPEC.replace("compute: local\n", "compute: azureml:gpu\n")
                 + "")
    g = grid.build_grid(str(spec), ["resources.instance_type=Standard_ND96isr_H100_v5"],
                        ["inputs.lr=0.1,0.2", "distribution.process_count_per_instance=2,8"], name="g")
    idle = [d.message for d in g.warnings if "sit idle" in d.message]
    # 2 processes per node on an 8-GPU size: only the combinations with 2 warn, each labelled
    assert len(idle) == 2 and all(m.startswith("[inputs.lr=") and "process_count_per_instance=2]" in m for m in idle)
    same = grid.build_grid(str(spec), ["resources.instance_type=Standard_ND96isr_H100_v5"],
                           ["inputs.lr=0.1,0.2,0.3"], name="g")
    assert len([d for d in same.warnings if "sit idle" in d.message]) == 1
    assert not any(d.message.startswith("[") for d in same.warnings)


# --- the command line, without running a job -------------------------------------------------------

def test_dry_run_lists_every_job_and_submits_nothing(cli, write, dtrain_home):
    spec = write("job.yml", SPEC)
    r = cli("submit", spec, "--local", "--matrix", "inputs.lr=0.1,0.2", "--matrix", "inputs.epochs=1,2",
            "--name", "dry", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == [
        "inputs.lr=0.1 inputs.epochs=1", "inputs.lr=0.1 inputs.epochs=2",
        "inputs.lr=0.2 inputs.epochs=1", "inputs.lr=0.2 inputs.epochs=2"]
    assert all(line.startswith("dry-") for line in lines)
    assert "nothing was submitted" in r.stderr and not (dtrain_home / "jobs").exists()


@pytest.mark.parametrize("args,words", [
    (["--max-parallel", "2"], "--max-parallel only applies with --matrix"),
    (["--matrix", "inputs.lr"], "has no '='"),
    (["--matrix", "inputs.lr=1,2", "--max-parallel", "0"], "at least 1"),
    (["--matrix", "inputs.lr=1,2", "--quiet", "--wait"], "--quiet does nothing with --matrix"),
    (["--matrix", "inputs.lr=1,2", "--timeout", "5"], "--timeout only applies with --wait"),
    (["--matrix", "inputs.lr=1,2", "--name", "bad name"], "not a valid job name"),
])
def test_submit_matrix_usage_errors(cli, write, dtrain_home, args, words):
    r = cli("submit", write("job.yml", SPEC), "--local", *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (dtrain_home / "jobs").exists()


@pytest.mark.parametrize("args,words", [
    (["--nodes", "1,x"], "not a list of node counts"), (["--nodes", "2,2"], "each once"),
    (["--nodes", "0,1"], "at least 1"), (["--nodes", "1,2", "--steps", "0"], "--steps must be at least 1"),
    (["--nodes", "1,2", "--warmup", "1"], "--warmup"), (["--nodes", "1,2", "--output", "jsonl"], "--output"),
])
def test_scale_usage_errors(cli, write, dtrain_home, args, words):
    r = cli("scale", write("job.yml", SPEC), "--local", *args)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert not (dtrain_home / "jobs").exists()
