"""spec.model.layout: the one place that lays out every rank of a job (rank, node, local rank, role)."""
import pytest

from dtrain.spec.model import Distribution, RankSlot, layout


def test_pytorch_fills_each_node_in_turn():
    slots = layout(Distribution("pytorch", process_count_per_instance=3), 2)
    assert [(s.rank, s.node, s.local_rank) for s in slots] == [
        (0, 0, 0), (1, 0, 1), (2, 0, 2), (3, 1, 0), (4, 1, 1), (5, 1, 2)]
    assert {s.role for s in slots} == {"process"}


def test_mpi_ranks_are_laid_out_as_openmpi_by_slot():
    slots = layout(Distribution("mpi", process_count_per_instance=2), 3)
    assert [(s.rank, s.node, s.local_rank, s.role) for s in slots][-1] == (5, 2, 1, "rank")


def test_tensorflow_workers_then_parameter_servers_spread_over_the_nodes():
    slots = layout(Distribution("tensorflow", worker_count=3, parameter_server_count=1), 2)
    assert [s.role for s in slots] == ["worker", "worker", "worker", "ps"]
    assert [s.node for s in slots] == [0, 0, 1, 1] and [s.local_rank for s in slots] == [0, 1, 0, 1]


def test_no_distribution_runs_once_per_node():
    assert layout(None, 3) == [RankSlot(0, 0, 0, "process"), RankSlot(1, 1, 0, "process"),
                               RankSlot(2, 2, 0, "process")]


@pytest.mark.parametrize("d,nodes", [(Distribution("pytorch", 4), 2), (Distribution("mpi", 8), 2),
                                     (Distribution("tensorflow", worker_count=2), 3), (None, 2)])
def test_the_local_plan_starts_exactly_the_laid_out_ranks(tmp_path, d, nodes):
    from dtrain.backends.base import SubmitOptions
    from dtrain.backends.local.plan import build_plan
    from dtrain.spec.model import JobSpec

    dist = None if d is None else {"type": d.type, **({"process_count_per_instance": d.process_count_per_instance}
                                                      if d.process_count_per_instance else {}),
                                   **({"worker_count": d.worker_count} if d.worker_count else {})}
    data = {"command": "echo hi", "resources": {"instance_count": nodes}, **({"distribution": dist} if dist else {})}
    plan = build_plan(JobSpec(data=data, base_dir=tmp_path), SubmitOptions(name="lay"), home=tmp_path)
    got = [(r["rank"], r["node"], r["local_rank"], r["role"]) for r in plan.ranks]
    assert got == [(s.rank, s.node, s.local_rank, s.role) for s in layout(d, nodes)]
    assert len({r for r, *_ in got}) == (d.process_count(nodes) if d else nodes)
