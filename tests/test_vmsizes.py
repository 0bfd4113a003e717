"""Tests for the offline Azure GPU VM size catalog (dtrain.spec.vmsizes)."""

from __future__ import annotations

import pytest

from dtrain.spec import vmsizes
from dtrain.errors import SpecError
from dtrain.spec.validate import load_spec
from dtrain.spec.vmsizes import all_sizes, lookup, suggest

REQUIRED_FAMILIES = {
    "NC v3",
    "NC T4 v3",
    "NC A100 v4",
    "NC H100 v5",
    "NV A10 v5",
    "ND v2",
    "ND A100 v4",
    "NDm A100 v4",
    "ND H100 v5",
    "ND H200 v5",
}

REQUIRED_SIZES = {
    "Standard_NC6s_v3",
    "Standard_NC12s_v3",
    "Standard_NC24s_v3",
    "Standard_NC24rs_v3",
    "Standard_NC4as_T4_v3",
    "Standard_NC8as_T4_v3",
    "Standard_NC16as_T4_v3",
    "Standard_NC64as_T4_v3",
    "Standard_NC24ads_A100_v4",
    "Standard_NC48ads_A100_v4",
    "Standard_NC96ads_A100_v4",
    "Standard_NC40ads_H100_v5",
    "Standard_NC80adis_H100_v5",
    "Standard_NV6ads_A10_v5",
    "Standard_NV12ads_A10_v5",
    "Standard_NV18ads_A10_v5",
    "Standard_NV36ads_A10_v5",
    "Standard_NV36adms_A10_v5",
    "Standard_NV72ads_A10_v5",
    "Standard_ND40rs_v2",
    "Standard_ND96asr_v4",
    "Standard_ND96amsr_A100_v4",
    "Standard_ND96isr_H100_v5",
    "Standard_ND96isr_H200_v5",
}


# --- lookup -----------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "Standard_NC24ads_A100_v4",
        "standard_nc24ads_a100_v4",
        "STANDARD_NC24ADS_A100_V4",
        "NC24ads_A100_v4",
        "nc24ads_a100_v4",
        "  Standard_NC24ads_A100_v4  ",
    ],
)
def test_lookup_variants(query: str) -> None:
    size = lookup(query)
    assert size is not None
    assert size.name == "Standard_NC24ads_A100_v4"


@pytest.mark.parametrize(
    "query",
    ["Standard_NC24ads_A100_v5", "Standard_Foo", "", "standard_", "nc24adsa100v4", "D4s_v3"],
)
def test_lookup_unknown_returns_none(query: str) -> None:
    assert lookup(query) is None


def test_lookup_non_string_returns_none() -> None:
    assert lookup(None) is None  # type: ignore[arg-type]


def test_lookup_returns_canonical_instance() -> None:
    for size in all_sizes():
        assert lookup(size.name) is size
        assert lookup(size.name.lower()) is size
        assert lookup(size.name[len("Standard_"):]) is size


# --- what the catalog decides: validate's checks and init's comment ------------------------------------

# GPUs per VM and InfiniBand, from each family's page on learn.microsoft.com (vmsizes.FAMILY_SOURCES).
PUBLISHED = [
    ("Standard_NC6s_v3", 1, False),
    ("Standard_NC24s_v3", 4, False),
    ("Standard_NC24rs_v3", 4, True),
    ("Standard_NC4as_T4_v3", 1, False),
    ("Standard_NC64as_T4_v3", 4, False),
    ("Standard_NC24ads_A100_v4", 1, False),
    ("Standard_NC96ads_A100_v4", 4, False),
    ("Standard_NC40ads_H100_v5", 1, False),
    ("Standard_NC80adis_H100_v5", 2, False),
    ("Standard_NV36ads_A10_v5", 1, False),
    ("Standard_NV72ads_A10_v5", 2, False),
    ("Standard_ND40rs_v2", 8, True),
    ("Standard_ND96asr_v4", 8, True),
    ("Standard_ND96amsr_A100_v4", 8, True),
    ("Standard_ND96isr_H100_v5", 8, True),
    ("Standard_ND96isr_H200_v5", 8, True),
    ("Standard_ND96isr_MI300X_v5", 8, True),
]


def _codes(tmp_path, size: str, ppn: int, nodes: int = 1):
    p = tmp_path / "job.yml"
    p.write_text("command: python train.py\nenvironment: azureml:env:1\n"
                 f"distribution:\n  type: pytorch\n  process_count_per_instance: {ppn}\n"
                 f"resources:\n  instance_type: {size}\n  instance_count: {nodes}\n")
    try:
        _, diags = load_spec(p)
    except SpecError as exc:
        diags = exc.diagnostics
    return sorted(d.code for d in diags)


@pytest.mark.parametrize(("name", "gpus", "ib"), PUBLISHED)
def test_validate_matches_processes_to_gpus_and_multi_node_to_infiniband(tmp_path, name, gpus, ib) -> None:
    assert _codes(tmp_path, name, gpus) == []
    assert _codes(tmp_path, name, gpus + 1) == ["gpu-oversubscribed"]
    assert _codes(tmp_path, name, gpus, nodes=2) == ([] if ib else ["no-infiniband"])
    if gpus > 1:
        assert _codes(tmp_path, name, gpus - 1) == ["idle-gpus"]


@pytest.mark.parametrize(("name", "comment"), [
    ("NC6s_v3", "1 x V100 16GB, no InfiniBand"),
    ("NC24rs_v3", "4 x V100 16GB, InfiniBand FDR"),
    ("NC8as_T4_v3", "1 x T4 16GB, no InfiniBand"),
    ("NC48ads_A100_v4", "2 x A100 80GB PCIe, no InfiniBand"),
    ("NC40ads_H100_v5", "1 x H100 94GB NVL, no InfiniBand"),
    ("ND96asr_v4", "8 x A100 40GB, InfiniBand HDR 200 Gb/s"),
    ("ND96isr_H100_v5", "8 x H100 80GB, InfiniBand NDR 400 Gb/s"),
    ("ND96isr_H200_v5", "8 x H200 141GB, InfiniBand NDR 400 Gb/s"),
    ("ND96isr_MI300X_v5", "8 x AMD Instinct MI300X 192GB, InfiniBand NDR 400 Gb/s"),
    ("NV6ads_A10_v5", "1/6 of an A10 24GB (4GB), no InfiniBand"),
    ("NV12ads_A10_v5", "1/3 of an A10 24GB (8GB), no InfiniBand"),
    ("NV18ads_A10_v5", "1/2 of an A10 24GB (12GB), no InfiniBand"),
])
def test_init_describes_gpu_model_memory_and_fabric(name: str, comment: str) -> None:
    from dtrain.templates import size_comment

    assert size_comment(lookup(name)) == comment


def test_only_r_size_of_ncv3_has_infiniband() -> None:
    ncv3 = [s for s in all_sizes() if s.family == "NC v3"]
    assert {s.name for s in ncv3 if s.infiniband} == {"Standard_NC24rs_v3"}


# --- catalog invariants -------------------------------------------------------


def test_names_unique() -> None:
    names = [s.name for s in all_sizes()]
    assert len(names) == len(set(names))
    lowered = [n.lower() for n in names]
    assert len(lowered) == len(set(lowered))


def test_required_families_and_sizes_present() -> None:
    families = {s.family for s in all_sizes()}
    assert REQUIRED_FAMILIES <= families
    names = {s.name for s in all_sizes()}
    assert REQUIRED_SIZES <= names


def test_every_family_has_a_source() -> None:
    families = {s.family for s in all_sizes()}
    assert families == set(vmsizes.FAMILY_SOURCES)
    for url in vmsizes.FAMILY_SOURCES.values():
        assert url.startswith("https://learn.microsoft.com/")


def test_field_invariants() -> None:
    for s in all_sizes():
        assert s.name.startswith("Standard_")
        assert s.gpus >= 1
        assert 0 < s.gpu_fraction <= 1.0
        if s.gpu_fraction < 1.0:
            assert s.gpus == 1
        assert s.gpu_model
        assert s.gpu_memory_gib > 0
        assert s.vcpus > 0 and s.memory_gib > 0
        assert ("InfiniBand" in s.interconnect) == s.infiniband


# --- suggest -------------------------------------------------------------------


def test_suggest_version_typo() -> None:
    out = suggest("Standard_ND96isr_H100_v4")
    assert out
    assert out[0] == "Standard_ND96isr_H100_v5"


def test_suggest_missing_underscore_lowercase() -> None:
    out = suggest("nc24ads_a100v4")
    assert out
    assert out[0] == "Standard_NC24ads_A100_v4"


def test_suggest_respects_n() -> None:
    assert len(suggest("Standard_NC24s_v3", n=2)) <= 2
    assert suggest("Standard_NC24s_v3", n=0) == []


def test_suggest_returns_canonical_names() -> None:
    for name in suggest("nd96isr_h200v5", n=5):
        assert lookup(name) is not None
        assert lookup(name).name == name  # type: ignore[union-attr]


def test_suggest_nothing_close() -> None:
    assert suggest("zzzzzzzzzzzzzzzzzz") == []
    assert suggest("") == []
