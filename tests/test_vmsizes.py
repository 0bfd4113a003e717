"""Tests for the offline Azure GPU VM size catalog (dtrain.spec.vmsizes)."""

from __future__ import annotations

import dataclasses

import pytest

from dtrain.spec import vmsizes
from dtrain.spec.vmsizes import VmSize, all_sizes, lookup, suggest

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


# --- spot values per family ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpus", "ib", "gpu_mem", "vcpus", "mem"),
    [
        ("Standard_NC6s_v3", 1, False, 16, 6, 112),
        ("Standard_NC24s_v3", 4, False, 16, 24, 448),
        ("Standard_NC24rs_v3", 4, True, 16, 24, 448),
        ("Standard_NC4as_T4_v3", 1, False, 16, 4, 28),
        ("Standard_NC64as_T4_v3", 4, False, 16, 64, 440),
        ("Standard_NC24ads_A100_v4", 1, False, 80, 24, 220),
        ("Standard_NC96ads_A100_v4", 4, False, 80, 96, 880),
        ("Standard_NC40ads_H100_v5", 1, False, 94, 40, 320),
        ("Standard_NC80adis_H100_v5", 2, False, 94, 80, 640),
        ("Standard_NV36ads_A10_v5", 1, False, 24, 36, 440),
        ("Standard_NV72ads_A10_v5", 2, False, 24, 72, 880),
        ("Standard_ND40rs_v2", 8, True, 32, 40, 672),
        ("Standard_ND96asr_v4", 8, True, 40, 96, 900),
        ("Standard_ND96amsr_A100_v4", 8, True, 80, 96, 1900),
        ("Standard_ND96isr_H100_v5", 8, True, 80, 96, 1900),
        ("Standard_ND96isr_H200_v5", 8, True, 141, 96, 1850),
        ("Standard_ND96isr_MI300X_v5", 8, True, 192, 96, 1850),
    ],
)
def test_spot_values(name: str, gpus: int, ib: bool, gpu_mem: float, vcpus: int, mem: float) -> None:
    size = lookup(name)
    assert size is not None
    assert size.gpus == gpus
    assert size.infiniband is ib
    assert size.gpu_memory_gib == gpu_mem
    assert size.vcpus == vcpus
    assert size.memory_gib == mem


def test_gpu_models() -> None:
    assert "V100" in lookup("NC6s_v3").gpu_model  # type: ignore[union-attr]
    assert lookup("NC8as_T4_v3").gpu_model == "T4"  # type: ignore[union-attr]
    assert lookup("NC48ads_A100_v4").gpu_model == "A100 80GB PCIe"  # type: ignore[union-attr]
    assert lookup("NC40ads_H100_v5").gpu_model == "H100 94GB NVL"  # type: ignore[union-attr]
    assert lookup("ND96isr_H200_v5").gpu_model == "H200 141GB"  # type: ignore[union-attr]
    assert "MI300X" in lookup("ND96isr_MI300X_v5").gpu_model  # type: ignore[union-attr]


def test_only_r_size_of_ncv3_has_infiniband() -> None:
    ncv3 = [s for s in all_sizes() if s.family == "NC v3"]
    assert {s.name for s in ncv3 if s.infiniband} == {"Standard_NC24rs_v3"}


def test_ndr_fabric_noted_for_h100() -> None:
    size = lookup("Standard_ND96isr_H100_v5")
    assert size is not None
    assert "NDR 400 Gb/s x8" in size.interconnect


@pytest.mark.parametrize(
    ("name", "fraction", "gpu_mem"),
    [
        ("Standard_NV6ads_A10_v5", 1 / 6, 4),
        ("Standard_NV12ads_A10_v5", 1 / 3, 8),
        ("Standard_NV18ads_A10_v5", 1 / 2, 12),
        ("Standard_NV36ads_A10_v5", 1.0, 24),
    ],
)
def test_fractional_a10(name: str, fraction: float, gpu_mem: float) -> None:
    size = lookup(name)
    assert size is not None
    assert size.gpus == 1  # a process can use the partition
    assert size.gpu_fraction == pytest.approx(fraction)
    assert size.gpu_memory_gib == gpu_mem


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
        assert isinstance(s, VmSize)
        assert s.name.startswith("Standard_")
        assert isinstance(s.gpus, int) and s.gpus >= 1
        assert 0 < s.gpu_fraction <= 1.0
        if s.gpu_fraction < 1.0:
            assert s.gpus == 1
        assert s.gpu_model
        assert s.gpu_memory_gib > 0
        assert isinstance(s.vcpus, int) and s.vcpus > 0
        assert s.memory_gib > 0
        assert isinstance(s.infiniband, bool)
        if s.infiniband:
            assert "InfiniBand" in s.interconnect


def test_frozen() -> None:
    size = all_sizes()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        size.gpus = 99  # type: ignore[misc]


def test_all_sizes_is_tuple() -> None:
    assert isinstance(all_sizes(), tuple)


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
