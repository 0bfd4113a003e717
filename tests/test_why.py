"""dtrain why: the classifier (dtrain.diagnose) on log folders written from what the frameworks print
(tests/why_logs/), its bounded memory, and the catalogue in docs/troubleshooting.md."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dtrain.backends.base import RankLog
from dtrain.backends.safefile import lines_of
from dtrain.diagnose import CAUSES, JobFacts, diagnose, folder_logs

LOGS = Path(__file__).parent / "why_logs"
DOCS = Path(__file__).parent.parent / "docs"

# folder -> [(kind, ranks)] in the order reported (the top cause first)
EXPECTED = {
    "clean": [],
    "nccl_timeout_absent": [("collective_timeout", [3])],
    "nccl_timeout_behind": [("collective_timeout", [2])],
    "gloo_timeout": [("collective_timeout", [3])],
    "horovod_stall": [("collective_timeout", [1])],
    "torch_oom": [("gpu_oom", [2]), ("collective_timeout", [2])],
    "tf_oom": [("gpu_oom", [1])],
    "duplicate_gpu": [("too_many_processes", [0, 1]), ("nccl_error", [0, 1])],
    "invalid_ordinal": [("too_many_processes", [8])],
    "missing_module": [("missing_module", [0, 1])],
    "no_space": [("no_space", [0])],
    "rendezvous": [("rendezvous", [3])],
    "nccl_system_error": [("nccl_error", [0, 1])],
    "nccl_remote": [("nccl_error", [0, 1])],
    "nccl_socket_ib": [],                  # a speed hint only where the VM size is known (below)
    "mpi_killed": [("killed", [1])],
    "local_killed": [("killed", [1])],
    "python_error": [("python_error", [1])],
}


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_each_folder_gives_its_causes_with_the_right_ranks(folder):
    causes = diagnose(folder_logs(LOGS / folder))
    assert [(c.kind, c.ranks) for c in causes] == EXPECTED[folder]
    for c in causes:
        assert c.hint and c.summary
        for file, line, text in c.evidence:        # evidence points at the real line of the real file
            if line:
                got = (LOGS / folder / file).read_text().splitlines()[line - 1]
                assert got.startswith(text)


def test_every_fixture_folder_has_an_expectation():
    assert sorted(p.name for p in LOGS.iterdir() if p.is_dir()) == sorted(EXPECTED)


def test_summaries_quote_what_the_message_gives():
    def top(folder):
        return diagnose(folder_logs(LOGS / folder))[0].summary

    assert "2.00 GiB" in top("torch_oom")
    assert "[64,1024,1024]" in top("tf_oom")
    assert "'transformers'" in top("missing_module")
    assert "/mnt/tmp/ckpt/step_400.pt" in top("no_space")
    assert "rank 3 never joined" in top("rendezvous")
    assert "rank 2 at SeqNum 1579" in top("nccl_timeout_behind")
    assert "10-0-0-5" in top("mpi_killed")
    assert 'line 42, in step' in top("python_error")


def test_nccl_errors_say_to_rerun_with_nccl_debug():
    for folder in ("nccl_system_error", "nccl_remote"):
        (c,) = diagnose(folder_logs(LOGS / folder))
        assert "NCCL_DEBUG=INFO" in c.hint
    (remote,) = diagnose(folder_logs(LOGS / "nccl_remote"))
    assert "remote process exited" in remote.evidence[0][2]


@pytest.mark.parametrize("size, nodes, found", [
    ("Standard_ND96isr_H100_v5", 2, True),       # InfiniBand, two nodes: sockets are the slow path
    ("Standard_ND96isr_H100_v5", None, True),    # node count unknown (a downloaded folder): said
    ("Standard_ND96isr_H100_v5", 1, False),      # one node: no network between ranks to speak of
    ("Standard_NC24ads_A100_v4", 2, False),      # no InfiniBand: sockets are all there is
    (None, 2, False),                            # size unknown: nothing to say
])
def test_nccl_on_sockets_is_a_hint_only_on_a_multi_node_infiniband_size(size, nodes, found):
    causes = diagnose(folder_logs(LOGS / "nccl_socket_ib"), job=JobFacts(status="Completed", nodes=nodes,
                                                                       instance_type=size))
    assert [(c.kind, c.ranks) for c in causes] == ([("nccl_socket", [0, 1, 2, 3])] if found else [])
    if found:
        assert "InfiniBand" in causes[0].summary and "NET/Socket : Using" in causes[0].evidence[0][2]


def test_a_socket_hint_comes_after_the_failure_and_hides_no_traceback():
    facts = JobFacts(status="Failed", nodes=2, instance_type="Standard_ND96isr_H100_v5")
    socket = list(folder_logs(LOGS / "nccl_socket_ib"))
    tb = folder_logs(LOGS / "python_error")
    socket[1].lines = iter([*socket[1].lines, *tb[1].lines])        # rank 1 also raised
    socket[1].exit_code = 1
    assert [c.kind for c in diagnose(socket, job=facts)] == ["python_error", "nccl_socket"]


# Azure ML's own words for a preempted low-priority node (Azure/MachineLearningNotebooks#1242), reported
# with the job Failed; and the local backend's for a lost supervisor (backends/local/watchdog.py).
AZURE_PREEMPTED = ("AzureMLCompute job failed. PreemptionError: Nodes of this job got pre-empted. Check if the "
                   "run has failed or restarted. Reason: Received pre-emption warning signal")


@pytest.mark.parametrize("status, message, kind", [
    ("Failed", AZURE_PREEMPTED, "preempted"),
    ("NotResponding", "preempted by the eviction drill (--preempt-after 5s)", "preempted"),
    ("NotResponding", None, "lost_node"),
    ("NotResponding", "the local supervisor (pid 4242) is gone (killed, or the machine restarted) while the job "
                      "was Running; its processes were stopped", "lost_node"),
    ("Completed", None, None),
    ("Failed", "rank 1 (node 0) exited with code 1", None),
])
def test_preemption_and_lost_nodes_come_from_the_jobs_status(status, message, kind):
    causes = diagnose(folder_logs(LOGS / "clean"), job=JobFacts(status=status, message=message))
    assert [c.kind for c in causes] == ([kind] if kind else [])
    if kind:
        (c,) = causes
        assert c.evidence[0][:2] == ("job status", 0) and status in c.evidence[0][2]


def test_a_preempted_job_puts_preemption_before_what_its_ranks_said_after():
    causes = diagnose(folder_logs(LOGS / "gloo_timeout"), job=JobFacts(status="Failed", message=AZURE_PREEMPTED))
    assert [c.kind for c in causes] == ["preempted", "collective_timeout"]


def test_why_dir_takes_the_instance_type(cli):
    r = cli("why", str(LOGS / "nccl_socket_ib"), "--instance-type", "Standard_ND96isr_H100_v5", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [c["kind"] for c in json.loads(r.stdout)["causes"]] == ["nccl_socket"]
    assert cli("why", "some_job", "--instance-type", "Standard_ND96isr_H100_v5").returncode == 2


def test_a_local_job_folder_names_the_node_of_the_killed_rank():
    (killed,) = diagnose(folder_logs(LOGS / "local_killed"))
    assert killed.nodes == [1]
    assert "SIGTERM" not in killed.summary     # rank 0 was stopped by dtrain: not a cause


class _Line(str):
    """A log line that counts how many of its kind are alive."""

    alive = 0
    most = 0

    def __new__(cls, text):
        self = super().__new__(cls, text)
        cls.alive += 1
        cls.most = max(cls.most, cls.alive)
        return self

    def __del__(self):
        type(self).alive -= 1


def test_the_scan_holds_a_bounded_number_of_lines_whatever_the_log_size():
    n = 50_000

    def lines(rank):
        for i in range(n):
            yield _Line(f"[2025-01-10 10:00:00] rank {rank} step {i} loss 0.1")
            if i == n // 2:
                yield _Line("ModuleNotFoundError: No module named 'late'")

    logs = (RankLog(rank=r, node=0, source=f"r{r}", lines=lines(r)) for r in range(3))
    causes = diagnose(logs)
    assert [(c.kind, c.ranks) for c in causes] == [("missing_module", [0, 1, 2])]
    assert _Line.most < 50, f"{_Line.most} lines were held at once"


def test_lines_of_reads_a_file_line_by_line_and_cuts_an_endless_line(tmp_path):
    p = tmp_path / "log.txt"
    with open(p, "wb") as f:
        f.write(b"first\n")
        f.write(b"x" * 1_000_000 + b"\n")       # one long line: cut, its rest dropped
        f.write(b"third\r\n")
    got = list(lines_of(p, max_line=100))
    assert [len(t) for t in got] == [5, 100, 5] and got[2] == "third"



def test_why_dir_prints_cause_ranks_evidence_and_hint(cli):
    r = cli("why", str(LOGS / "nccl_timeout_absent"))
    assert r.returncode == 0, r.stderr
    assert "collective_timeout: ALLREDUCE (SeqNum 1580) timed out on ranks 0, 1, 2; lagging: rank 3" in r.stdout
    assert "user_logs/std_log_process_0.txt:3: [rank0]:" in r.stdout and "hint: " in r.stdout
    j = cli("why", str(LOGS / "missing_module"), "-o", "json")
    got = json.loads(j.stdout)
    assert set(got) == {"job", "causes"}
    (c,) = got["causes"]
    assert set(c) == {"kind", "ranks", "nodes", "summary", "evidence", "hint"}
    assert c["evidence"][0] == {"file": "user_logs/std_log_process_0.txt", "line": 4,
                                "text": "ModuleNotFoundError: No module named 'transformers'"}


def test_why_a_folder_without_logs_or_an_unknown_job_exits_2(cli, tmp_path):
    assert cli("why", str(tmp_path)).returncode == 2
    assert cli("why", "no_such_job", "--local").returncode == 2


def test_every_cause_kind_is_in_the_troubleshooting_catalogue():
    text = (DOCS / "troubleshooting.md").read_text()
    headings = set(re.findall(r"^### `([a-z_]+)`", text, re.M))
    assert {c.kind for c in CAUSES} <= headings


SPEC = """\
command: python train.py
environment: azureml:env@latest
compute: local
"""


def test_a_failed_wait_ends_with_the_top_cause_and_a_broken_diagnosis_changes_nothing(
        fake_backend, tmp_path, capsys, monkeypatch):
    from dtrain.cli import main
    from dtrain.runner import Runner

    spec = tmp_path / "job.yml"
    spec.write_text(SPEC)
    fake_backend.lines["bad"] = ["Traceback (most recent call last):", '  File "train.py", line 1, in <module>',
                                 "ModuleNotFoundError: No module named 'not_a_package'"]
    fake_backend.scripts["bad"] = ["Queued", "Running", "Failed"]
    assert main(["submit", str(spec), "--local", "--wait", "--name", "bad"]) == 1
    err = capsys.readouterr().err
    assert "bad: why: missing_module: 'not_a_package' cannot be imported" in err and "  hint: add the package" in err

    def broken(self, name, local=False):
        raise OSError("unreadable")

    monkeypatch.setattr(Runner, "why", broken)
    assert main(["wait", "bad"]) == 1
    assert "why:" not in capsys.readouterr().err


def test_why_name_reads_the_jobs_vm_size_for_the_socket_hint(fake_backend, capsys):
    from dtrain.backends.base import JobInfo
    from fakes import run_main

    socket = (LOGS / "nccl_socket_ib" / "user_logs" / "std_log_process_0.txt").read_text().splitlines()
    for name, size in (("ib", "Standard_ND96isr_H100_v5"), ("noib", "Standard_NC24ads_A100_v4")):
        fake_backend.add(JobInfo(name=name, backend="local", status="Completed", nodes=2, instance_type=size))
        fake_backend.lines[name] = socket
    code, out, _ = run_main(capsys, "why", "ib", "-o", "json")
    assert code == 0 and [c["kind"] for c in json.loads(out)["causes"]] == ["nccl_socket"]
    code, out, _ = run_main(capsys, "why", "noib", "-o", "json")
    assert code == 0 and json.loads(out)["causes"] == []
