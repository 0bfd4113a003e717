"""Catalog of Azure GPU VM sizes used by Azure ML compute clusters.

Offline data only: no Azure call is made. Every number comes from the
Microsoft Learn "Sizes for virtual machines in Azure" page of the size's
series; :data:`FAMILY_SOURCES` gives the page for each family and
``docs/vm-sizes.md`` lists every size with its source and caveats.

Units: ``memory_gib`` and ``gpu_memory_gib`` hold the numbers Azure
publishes. Azure's pages label them GiB in the series spec tables and "GB"
in some per-size tables; the numbers are the same and are kept as published.

Fractional GPUs (NVadsA10_v5): ``gpus`` is what a validator should use for
"processes per node" counting, the number of GPU devices a process can be
pinned to. A size with part of one GPU (1/6, 1/3, 1/2 of an A10) exposes
one (partitioned) device to the guest, so ``gpus`` is 1 and
``gpu_fraction`` says how much of the physical GPU that device is;
``gpu_memory_gib`` is then the memory of the partition.

Only the standard library is imported.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = [
    "VmSize",
    "FAMILY_SOURCES",
    "lookup",
    "suggest",
    "all_sizes",
]

_PREFIX = "standard_"


@dataclass(frozen=True)
class VmSize:
    name: str  # canonical, e.g. "Standard_ND96isr_H100_v5"
    family: str
    gpus: int  # whole GPUs a process can be pinned to (>=1 for GPU sizes)
    gpu_fraction: float  # 1.0 normally; e.g. 1/6 for NV6ads_A10_v5
    gpu_model: str
    gpu_memory_gib: float  # per GPU (or per partition)
    vcpus: int
    memory_gib: float
    infiniband: bool
    interconnect: str  # "" or a short description


_LEARN = "https://learn.microsoft.com/en-us/azure/virtual-machines/sizes/gpu-accelerated/"

#: Family -> the Microsoft Learn page its numbers were taken from.
FAMILY_SOURCES: dict[str, str] = {
    "NC v3": _LEARN + "ncv3-series",
    "NC T4 v3": _LEARN + "ncast4v3-series",
    "NC A100 v4": _LEARN + "nca100v4-series",
    "NC H100 v5": _LEARN + "ncadsh100v5-series",
    "NCC H100 v5": _LEARN + "nccadsh100v5-series",
    "NV A10 v5": _LEARN + "nvadsa10v5-series",
    "ND v2": _LEARN + "ndv2-series",
    "ND A100 v4": _LEARN + "ndasra100v4-series",
    "NDm A100 v4": _LEARN + "ndma100v4-series",
    "ND H100 v5": _LEARN + "ndh100v5-series",
    "ND H200 v5": _LEARN + "nd-h200-v5-series",
    "ND MI300X v5": _LEARN + "ndmi300xv5-series",
    "ND GB200 v6": _LEARN + "nd-gb200-v6-series",
}


def _s(
    name: str,
    family: str,
    gpus: int,
    gpu_model: str,
    gpu_memory_gib: float,
    vcpus: int,
    memory_gib: float,
    *,
    gpu_fraction: float = 1.0,
    infiniband: bool = False,
    interconnect: str = "",
) -> VmSize:
    return VmSize(
        name=name,
        family=family,
        gpus=gpus,
        gpu_fraction=gpu_fraction,
        gpu_model=gpu_model,
        gpu_memory_gib=float(gpu_memory_gib),
        vcpus=vcpus,
        memory_gib=float(memory_gib),
        infiniband=infiniband,
        interconnect=interconnect,
    )


_IB_HDR_X8 = "InfiniBand HDR 200 Gb/s x8 (1 per GPU), GPUDirect RDMA; NVLink 3.0"
_IB_NDR_X8 = "InfiniBand NDR 400 Gb/s x8 (Quantum-2 CX7, 1 per GPU), GPUDirect RDMA"

_SIZES: tuple[VmSize, ...] = (
    # NCv3: NVIDIA Tesla V100 16GB; NC24rs_v3 is the RDMA (InfiniBand) size.
    _s("Standard_NC6s_v3", "NC v3", 1, "V100 16GB", 16, 6, 112),
    _s("Standard_NC12s_v3", "NC v3", 2, "V100 16GB", 16, 12, 224),
    _s("Standard_NC24s_v3", "NC v3", 4, "V100 16GB", 16, 24, 448),
    _s(
        "Standard_NC24rs_v3", "NC v3", 4, "V100 16GB", 16, 24, 448,
        infiniband=True,
        interconnect="InfiniBand FDR (RDMA, SR-IOV)",
    ),
    # NCasT4_v3: NVIDIA T4 16GB.
    _s("Standard_NC4as_T4_v3", "NC T4 v3", 1, "T4", 16, 4, 28),
    _s("Standard_NC8as_T4_v3", "NC T4 v3", 1, "T4", 16, 8, 56),
    _s("Standard_NC16as_T4_v3", "NC T4 v3", 1, "T4", 16, 16, 110),
    _s("Standard_NC64as_T4_v3", "NC T4 v3", 4, "T4", 16, 64, 440),
    # NC_A100_v4: NVIDIA A100 PCIe 80GB.
    _s("Standard_NC24ads_A100_v4", "NC A100 v4", 1, "A100 80GB PCIe", 80, 24, 220),
    _s("Standard_NC48ads_A100_v4", "NC A100 v4", 2, "A100 80GB PCIe", 80, 48, 440),
    _s("Standard_NC96ads_A100_v4", "NC A100 v4", 4, "A100 80GB PCIe", 80, 96, 880),
    # NCads_H100_v5: NVIDIA H100 NVL 94GB (PCIe).
    _s("Standard_NC40ads_H100_v5", "NC H100 v5", 1, "H100 94GB NVL", 94, 40, 320),
    _s("Standard_NC80adis_H100_v5", "NC H100 v5", 2, "H100 94GB NVL", 94, 80, 640),
    # NCCads_H100_v5: confidential-computing H100 NVL.
    _s("Standard_NCC40ads_H100_v5", "NCC H100 v5", 1, "H100 94GB NVL", 94, 40, 320),
    # NVadsA10_v5: NVIDIA A10 24GB, partitioned on the small sizes.
    _s(
        "Standard_NV6ads_A10_v5", "NV A10 v5", 1, "A10 24GB", 4, 6, 55,
        gpu_fraction=1 / 6,
    ),
    _s(
        "Standard_NV12ads_A10_v5", "NV A10 v5", 1, "A10 24GB", 8, 12, 110,
        gpu_fraction=1 / 3,
    ),
    _s(
        "Standard_NV18ads_A10_v5", "NV A10 v5", 1, "A10 24GB", 12, 18, 220,
        gpu_fraction=1 / 2,
    ),
    _s("Standard_NV36ads_A10_v5", "NV A10 v5", 1, "A10 24GB", 24, 36, 440),
    _s("Standard_NV36adms_A10_v5", "NV A10 v5", 1, "A10 24GB", 24, 36, 880),
    _s("Standard_NV72ads_A10_v5", "NV A10 v5", 2, "A10 24GB", 24, 72, 880),
    # NDv2: 8x V100 32GB NVLink, EDR InfiniBand.
    _s(
        "Standard_ND40rs_v2", "ND v2", 8, "V100 32GB NVLink", 32, 40, 672,
        infiniband=True,
        interconnect="InfiniBand EDR 100 Gb/s; NVLink",
    ),
    # ND A100 v4 (NDasrA100_v4): 8x A100 40GB.
    _s(
        "Standard_ND96asr_v4", "ND A100 v4", 8, "A100 40GB", 40, 96, 900,
        infiniband=True, interconnect=_IB_HDR_X8,
    ),
    # NDm A100 v4: 8x A100 80GB.
    _s(
        "Standard_ND96amsr_A100_v4", "NDm A100 v4", 8, "A100 80GB", 80, 96, 1900,
        infiniband=True, interconnect=_IB_HDR_X8,
    ),
    # ND H100 v5: 8x H100 80GB.
    _s(
        "Standard_ND96isr_H100_v5", "ND H100 v5", 8, "H100 80GB", 80, 96, 1900,
        infiniband=True, interconnect=_IB_NDR_X8 + "; NVLink 4.0",
    ),
    # ND H200 v5: 8x H200 141GB.
    _s(
        "Standard_ND96isr_H200_v5", "ND H200 v5", 8, "H200 141GB", 141, 96, 1850,
        infiniband=True, interconnect=_IB_NDR_X8 + "; NVLink 900 GB/s",
    ),
    # ND MI300X v5: 8x AMD Instinct MI300X 192GB.
    _s(
        "Standard_ND96isr_MI300X_v5", "ND MI300X v5", 8,
        "AMD Instinct MI300X 192GB", 192, 96, 1850,
        infiniband=True, interconnect=_IB_NDR_X8 + "; AMD Infinity Fabric",
    ),
    # ND GB200 v6: 4x NVIDIA Blackwell (GB200) GPUs, 2x Grace CPUs (Arm).
    _s(
        "Standard_ND128isr_NDR_GB200_v6", "ND GB200 v6", 4,
        "GB200 (Blackwell) 192GB", 192, 128, 900,
        infiniband=True,
        interconnect="InfiniBand NDR 400 Gb/s x4 (Quantum-2 CX7); NVLink 5 (NVL72)",
    ),
)


def _key(name: str) -> str:
    """Lookup key: lowercase, surrounding space and the ``Standard_`` prefix removed."""
    k = name.strip().lower()
    if k.startswith(_PREFIX):
        k = k[len(_PREFIX):]
    return k


def _loose_key(name: str) -> str:
    """Key for did-you-mean matching: also ignores ``_``, ``-`` and spaces."""
    return "".join(ch for ch in _key(name) if ch not in "_- ")


_BY_KEY: dict[str, VmSize] = {}
_BY_LOOSE: dict[str, str] = {}
for _size in _SIZES:
    _k = _key(_size.name)
    _lk = _loose_key(_size.name)
    if _k in _BY_KEY or _lk in _BY_LOOSE:  # pragma: no cover - data guard
        raise RuntimeError(f"duplicate VM size in catalog: {_size.name}")
    _BY_KEY[_k] = _size
    _BY_LOOSE[_lk] = _size.name
del _size, _k, _lk


def lookup(name: str) -> VmSize | None:
    """Return the size called ``name``, or None if it is not in the catalog.

    Case-insensitive; the ``Standard_`` prefix is optional
    (``"Standard_NC24ads_A100_v4"``, ``"nc24ads_a100_v4"`` and
    ``"STANDARD_NC24ADS_A100_V4"`` all match). Underscores must be where
    Azure puts them; use :func:`suggest` for near misses.
    """
    if not isinstance(name, str):
        return None
    return _BY_KEY.get(_key(name))


def suggest(name: str, n: int = 3) -> list[str]:
    """Canonical names close to ``name`` (best first), for "did you mean".

    Matching ignores case, the ``Standard_`` prefix, and underscores, so
    ``"nc24ads_a100v4"`` finds ``"Standard_NC24ads_A100_v4"``.
    """
    if not isinstance(name, str) or n <= 0:
        return []
    loose = _loose_key(name)
    if not loose:
        return []
    out: list[str] = []
    exact = _BY_LOOSE.get(loose)
    if exact is not None:
        out.append(exact)
    for match in difflib.get_close_matches(loose, list(_BY_LOOSE), n=n + 1, cutoff=0.6):
        canonical = _BY_LOOSE[match]
        if canonical not in out:
            out.append(canonical)
    return out[:n]


def all_sizes() -> tuple[VmSize, ...]:
    """Every size in the catalog, in catalog order (grouped by family)."""
    return _SIZES
