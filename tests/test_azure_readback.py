"""Reading Azure jobs back as the service answers (issue 24): log names of every rank, failure text,
list by tag and by creation time, cancel that takes time. Unit tests of the backend's functions."""
from __future__ import annotations

from dtrain.backends.azure.logs import parse_log_name, rank_of, role_of, user_logs


def _files(*names: str) -> dict:
    return {n: f"https://acct.blob/{n}?sig" for n in names}


def test_every_rank_file_maps_to_its_rank_and_role_including_padded_and_ps():
    # a TensorFlow job of 2 workers and 2 parameter servers: workers are ranks 0-1, servers 2-3
    files = _files("user_logs/std_log_process_00.txt", "user_logs/std_log_process_01.txt",
                   "user_logs/std_log_process_00_ps.txt", "user_logs/std_log_process_01_ps.txt",
                   "azureml-logs/70_driver_log.txt", "user_logs/std_log_process_0_lifecycler.txt")
    got = user_logs(files, workers=2)
    assert {r: name for r, (name, _) in got.items()} == {
        0: "user_logs/std_log_process_00.txt", 1: "user_logs/std_log_process_01.txt",
        2: "user_logs/std_log_process_00_ps.txt", 3: "user_logs/std_log_process_01_ps.txt"}
    assert [role_of(got[r][0]) for r in range(4)] == ["worker", "worker", "ps", "ps"]
    assert got[2][1] == files["user_logs/std_log_process_00_ps.txt"]


def test_log_names_the_sdks_rank0_pattern_accepts():
    assert parse_log_name("user_logs/std_log.txt") == (0, "worker")
    assert parse_log_name("user_logs/std_log_process_0.txt") == (0, "worker")
    assert parse_log_name("user_logs/std_log_process_007.txt") == (7, "worker")
    assert parse_log_name("user_logs/std_log_process_00_ps.txt") == (0, "ps")
    assert parse_log_name("user_logs/std_log_process_0.txt.bak") is None
    assert rank_of("user_logs/std_log_process_03.txt") == 3
    assert rank_of("user_logs/std_log_process_01_ps.txt", workers=4) == 5
    assert rank_of("user_logs/std_log_process_01_ps.txt") is None      # no layout to place it in


def test_without_a_worker_count_servers_come_after_the_worker_files_and_numbered_beats_single():
    files = _files("user_logs/std_log.txt", "user_logs/std_log_process_0.txt", "user_logs/std_log_process_1.txt",
                   "user_logs/std_log_process_0_ps.txt")
    got = user_logs(files)
    assert {r: name for r, (name, _) in got.items()} == {
        0: "user_logs/std_log_process_0.txt", 1: "user_logs/std_log_process_1.txt",
        2: "user_logs/std_log_process_0_ps.txt"}
    assert {r: n for r, (n, _) in user_logs(_files("user_logs/std_log.txt")).items()} == {0: "user_logs/std_log.txt"}
