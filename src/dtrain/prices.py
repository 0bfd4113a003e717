"""What a VM size costs per hour, with where the figure came from and how old it is.

Three sources, asked in this order:
1. the disk cache ($DTRAIN_HOME/prices/cache.json): what the Azure Retail Prices API answered here, with
   the day it answered;
2. the Azure Retail Prices API (https://prices.azure.com/api/retail/prices, public, no credentials), only
   when the caller allows the network (`dtrain cost` does, unless --offline or DTRAIN_PRICES_OFFLINE=1;
   submit, status and CI summaries never wait on it); DTRAIN_PRICES_URL points it elsewhere (tests: the
   emulator);
3. the snapshot shipped in the package (data/prices.csv, data/prices.source.json): SkyPilot's public
   catalog of Azure ML VM prices at a named commit, filtered against dtrain's VM size table.

Every Price says its source and date, so every output can say how old the price is. Imports no backend.
"""
from __future__ import annotations

import csv
import json
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .spec.vmsizes import lookup as lookup_size

DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
CACHE_DAYS = 7            # a cached API price is used as it is for a week, then asked again when allowed
MAX_PAGES = 10            # one size in one region is a page or two; more is a wrong filter, not data
TIERS = ("dedicated", "low_priority")


@dataclass(frozen=True)
class Price:
    vm_size: str
    region: str
    tier: str                 # "dedicated" | "low_priority"
    per_hour: float           # USD per VM per hour
    currency: str
    source: str               # "Azure Retail Prices API" | "snapshot: SkyPilot catalog ..."
    as_of: str                # ISO date: when the API answered, or when the snapshot was taken

    def age_days(self, today: date | None = None) -> int:
        return max(0, ((today or datetime.now(timezone.utc).date()) - date.fromisoformat(self.as_of)).days)

    def describe(self) -> str:
        """"$98.32/h per node (Azure Retail Prices API, 2026-11-25, 3 days old)"."""
        return f"${self.per_hour:,.4g}/h per node ({self.source}, {when(self.source, self.as_of, self.age_days())})"

    def to_dict(self) -> dict:
        return {**asdict(self), "age_days": self.age_days()}


def when(source: str, as_of: str, age: int) -> str:
    """How old a price is: "2026-11-25, 3 days old"; a snapshot's date is the day it was copied and the
    catalog's own is older (unknown): "copied 2026-11-25, at least 3 days old"."""
    days = "today" if age == 0 else f"{age} day{'s' if age != 1 else ''} old"
    if source.startswith("snapshot"):
        return f"copied {as_of}, " + ("today" if age == 0 else "at least " + days)
    return f"{as_of}, {days}"


# --- the shipped snapshot ----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def snapshot_source() -> dict:
    return json.loads((resources.files("dtrain") / "data" / "prices.source.json").read_text())


@lru_cache(maxsize=1)
def _snapshot() -> dict:
    """(vm size lower case, region) -> (price, spot price or None)."""
    rows = {}
    text = (resources.files("dtrain") / "data" / "prices.csv").read_text()
    for r in csv.DictReader(text.splitlines()):
        spot = float(r["spot_price_per_hour"]) if r["spot_price_per_hour"] else None
        rows[(r["vm_size"].lower(), r["region"])] = (float(r["price_per_hour"]), spot)
    return rows


def snapshot_price(vm_size: str, region: str, tier: str = "dedicated") -> Price | None:
    found = _snapshot().get((vm_size.lower(), region))
    if found is None:
        return None
    per_hour = found[0] if tier == "dedicated" else found[1]
    if per_hour is None:
        return None
    src = snapshot_source()
    label = f"snapshot: SkyPilot catalog {src['commit'][:7]}" + (", its spot price" if tier != "dedicated" else "")
    return Price(vm_size, region, tier, per_hour, src["currency"], label, src["retrieved"])


def snapshot_regions(vm_size: str) -> list[str]:
    return sorted(region for (size, region) in _snapshot() if size == vm_size.lower())


# --- the disk cache ---------------------------------------------------------------------------------
def _cache_path() -> Path:
    from .settings import current

    return current().home / "prices" / "cache.json"


def _cache_key(vm_size: str, region: str, tier: str) -> str:
    return f"{vm_size.lower()}|{region}|{tier}"


def cached_price(vm_size: str, region: str, tier: str) -> Price | None:
    try:
        entry = json.loads(_cache_path().read_text()).get(_cache_key(vm_size, region, tier))
        return Price(**entry) if entry else None
    except (OSError, ValueError, TypeError):
        return None                        # no cache, or one that cannot be read: as if empty


def _remember(price: Price) -> None:
    path = _cache_path()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        data = {}
    data[_cache_key(price.vm_size, price.region, price.tier)] = asdict(price)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass                               # a price that cannot be cached is still a price


# --- the Retail Prices API --------------------------------------------------------------------------
class PricesUnavailable(Exception):
    """The API could not be asked or gave no usable answer (the reason is the message)."""


def _filter(vm_size: str, region: str) -> str:
    return (f"serviceName eq 'Virtual Machines' and armSkuName eq '{vm_size}' and armRegionName eq '{region}' "
            "and priceType eq 'Consumption'")


def _matches(item: dict, tier: str) -> bool:
    """A Linux pay-as-you-go meter of the tier: Windows meters have 'Windows' in the product name, and the
    low-priority and spot meters say so in the SKU name (the API's documented examples)."""
    sku = str(item.get("skuName") or "")
    if "Windows" in str(item.get("productName") or "") or "hour" not in str(item.get("unitOfMeasure", "")).lower():
        return False
    if tier == "low_priority":
        return sku.endswith("Low Priority")
    return not sku.endswith(("Low Priority", "Spot"))


def api_price(vm_size: str, region: str, tier: str, *, url: str | None = None, timeout: float = 10.0) -> Price:
    """Ask the Retail Prices API (paged by NextPageLink) for the size's hourly price in the region."""
    from .settings import current

    base = url or current().text("DTRAIN_PRICES_URL") or DEFAULT_URL
    link: str | None = base + "?" + urllib.parse.urlencode({"$filter": _filter(vm_size, region)})
    for _ in range(MAX_PAGES):
        if not link:
            break
        page = _get(link, timeout)
        for item in page.get("Items") or []:
            if isinstance(item, dict) and _matches(item, tier) and float(item.get("retailPrice") or 0) > 0:
                price = Price(vm_size, region, tier, float(item["retailPrice"]), str(item.get("currencyCode") or "USD"),
                              "Azure Retail Prices API", datetime.now(timezone.utc).date().isoformat())
                _remember(price)
                return price
        link = page.get("NextPageLink")
    raise PricesUnavailable(f"the Retail Prices API lists no {tier.replace('_', ' ')} Linux price for {vm_size} "
                            f"in {region}")


def _get(link: str, timeout: float) -> dict:
    if not link.startswith(("https://", "http://127.0.0.1", "http://localhost")):
        raise PricesUnavailable(f"refusing to follow a price page link that is not https: {link[:80]}")
    try:
        with urllib.request.urlopen(urllib.request.Request(link, headers={"Accept": "application/json"}),
                                    timeout=timeout) as resp:
            return json.loads(resp.read(4 << 20))
    except (OSError, ValueError) as exc:    # URLError and HTTPError are OSErrors; ValueError: not JSON
        raise PricesUnavailable(f"the Retail Prices API could not be read ({type(exc).__name__}: "
                                f"{str(exc)[:200]})") from None


# --- the one entry point ----------------------------------------------------------------------------
@dataclass
class Lookup:
    price: Price | None
    notes: list                # what was tried and why it did not give the price (for the user)


def offline() -> bool:
    from .settings import current

    return current().prices_offline


def find(vm_size: str, region: str, tier: str = "dedicated", *, online: bool = False) -> Lookup:
    """The price of one VM of the size for an hour: a fresh cache entry, else the API (when online), else
    an older cache entry, else the shipped snapshot. Never raises for a missing price: says why."""
    size = lookup_size(vm_size)
    name = size.name if size else vm_size
    notes: list[str] = []
    cached = cached_price(name, region, tier)
    if cached and cached.age_days() < CACHE_DAYS:
        return Lookup(cached, notes)
    if online and not offline():
        try:
            return Lookup(api_price(name, region, tier), notes)
        except PricesUnavailable as exc:
            notes.append(str(exc))
    if cached:
        return Lookup(cached, notes)
    snap = snapshot_price(name, region, tier)
    if snap:
        return Lookup(snap, notes)
    notes.append(_no_snapshot_reason(name, region, tier))
    return Lookup(None, notes)


def _no_snapshot_reason(name: str, region: str, tier: str) -> str:
    src = snapshot_source()
    dropped = next((d for d in src.get("dropped", []) if d.startswith(f"{name} {region}:")), None)
    if dropped:
        return f"the shipped snapshot has no price for {name} in {region}: the catalog's {dropped.split(': ', 1)[1]}"
    regions = snapshot_regions(name)
    if regions and tier != "dedicated":
        return f"the shipped snapshot has no {tier.replace('_', ' ')} price for {name} in {region}"
    if regions:
        return f"the shipped snapshot has {name} only in {', '.join(regions)}, not {region}"
    return f"the shipped snapshot has no price for {name}"
