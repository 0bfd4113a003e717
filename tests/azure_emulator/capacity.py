"""The emulator's capacity routes: the subscription's usages (quota) in a region, a compute's allocation state,
and the public Azure Retail Prices API, each in the shape the real service answers (docs/azure-emulator.md).

- Usages_List: GET /subscriptions/{sub}/providers/Microsoft.MachineLearningServices/locations/{loc}/usages,
  {"value": [Usage...], "nextLink"} as machineLearningServices.json defines it and
  rest-spec/examples-2024-04-01/Usage/list.json shows (currentValue, limit, name.value, type, unit);
- the compute: Compute/get/AmlCompute.json's properties (scaleSettings, allocationState,
  allocationStateTransitionTime, currentNodeCount, targetNodeCount, nodeStateCounts, errors, vmPriority),
  set by `set_compute` on a compute added with AzureMLEmulator.add_compute;
- VirtualMachineSizes_List: GET .../locations/{loc}/vmSizes, {"value": [...]} as VirtualMachineSize/list.json
  (name, family "standardNCASv3_T4Family", vCPUs, gpus, ...), `emu.capacity.vm_sizes`;
- GET /api/retail/prices?$filter=...: the Retail Prices API's page ({"BillingCurrency", "CustomerEntityId",
  "CustomerEntityType", "Items", "NextPageLink", "Count"}, Microsoft Learn: Azure Retail Prices overview),
  `page_size` items a page, NextPageLink an absolute URL with $skip, as the service pages.

Faults (AzureMLEmulator.fail / throttle / reset_connection) apply to these paths like any other.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

_USAGES_RE = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.MachineLearningServices/locations/"
                        r"(?P<loc>[^/]+)/(?P<what>usages|vmSizes)$", re.IGNORECASE)
PRICES_PATH = "/api/retail/prices"
_FILTER_RE = re.compile(r"(\w+) eq '([^']*)'")
_VM_TYPE = "Microsoft.MachineLearningServices/vmFamily/usages"


def usage(family: str, current: int, limit: int, *, low_priority: bool = False) -> Dict[str, Any]:
    """A subscription-level VM family usage, as Usage/list.json has them."""
    tier = "LowPriority" if low_priority else "Dedicated"
    value = f"Standard {family} Family Cluster {tier} vCPUs"
    return {"id": f"/subscriptions/00000000-0000-0000-0000-000000000000/usages/Standard_{family}_Family_Cluster_{tier}_vCPUs",
            "type": _VM_TYPE, "currentValue": current, "limit": limit, "unit": "Count",
            "name": {"value": value, "localizedValue": value}}


def total(current: int, limit: int, *, low_priority: bool = False) -> Dict[str, Any]:
    """The region's total of cluster vCPUs (dedicatedCores / lowPriorityCores), as Usage/list.json has it."""
    kind, label = ("lowPriorityCores", "LowPriority") if low_priority else ("dedicatedCores", "Dedicated")
    value = f"Total Cluster {label} Regional vCPUs"
    return {"id": "/subscriptions/00000000-0000-0000-0000-000000000000/usages",
            "type": f"Microsoft.MachineLearningServices/{kind}/usages", "currentValue": current, "limit": limit,
            "unit": "Count", "name": {"value": value, "localizedValue": value}}


def default_usages() -> List[Dict[str, Any]]:
    """Room for the emulator's default clusters: NC (the gpu-cluster's STANDARD_NC24), Dv2, and the GPU
    families the templates and tests use, none of them in use."""
    return [total(0, 1000), usage("NC", 0, 96), usage("Dv2", 0, 96), usage("NDSH100v5", 0, 384),
            usage("NDAMSv4_A100", 0, 384), usage("NCADSA100v4", 0, 192), usage("NCASv3_T4", 0, 96)]


def vm_size(name: str, family: str, vcpus: int, gpus: int, memory_gb: float) -> Dict[str, Any]:
    """One entry of VirtualMachineSizes_List, in the shape of the example VirtualMachineSize/list.json."""
    return {"name": name, "family": family, "vCPUs": vcpus, "gpus": gpus, "osVhdSizeMB": 1047552,
            "maxResourceVolumeMB": 0, "memoryGB": memory_gb, "lowPriorityCapable": True, "premiumIO": True,
            "supportedComputeTypes": ["AmlCompute", "ComputeInstance"]}


def default_vm_sizes() -> List[Dict[str, Any]]:
    """The example's first size and the GPU sizes the tests use, with the family names Azure gives them."""
    return [vm_size("Standard_DS1_v2", "standardDSv2Family", 1, 0, 3.5),
            vm_size("Standard_NC8as_T4_v3", "standardNCASv3_T4Family", 8, 1, 56),
            vm_size("Standard_ND96isr_H100_v5", "standardNDSH100v5Family", 96, 8, 1900),
            vm_size("Standard_ND96amsr_A100_v4", "standardNDAMSv4_A100Family", 96, 8, 1900)]


class Capacity:
    """The state behind the routes: usages per region, retail price items, the page size."""

    def __init__(self) -> None:
        self.usages: Dict[str, List[Dict[str, Any]]] = {}       # region -> usages; missing: default_usages()
        self.prices: List[Dict[str, Any]] = []
        self.page_size = 2
        self.vm_sizes: List[Dict[str, Any]] = default_vm_sizes()   # VirtualMachineSizes_List's value

    def route(self, emu: Any, method: str, path: str, query: Dict[str, str]) -> Optional[Tuple[int, Dict[str, str], bytes]]:
        from .wire import HTTPError, _json

        m = _USAGES_RE.match(path)
        if m and method == "GET":
            if m.group("sub") != emu.subscription_id:
                raise HTTPError(404, "SubscriptionNotFound", f"The subscription '{m.group('sub')}' could not be found.")
            if m.group("what").lower() == "vmsizes":
                return _json(200, {"value": self.vm_sizes})
            return _json(200, {"value": self.usages.get(m.group("loc").lower(), default_usages()), "nextLink": None})
        if path == PRICES_PATH and method == "GET":
            return _json(200, self._prices_page(emu, query))
        return None

    def _prices_page(self, emu: Any, query: Dict[str, str]) -> Dict[str, Any]:
        wanted = dict(_FILTER_RE.findall(query.get("$filter", "")))
        items = [i for i in self.prices if all(str(i.get(k)) == v for k, v in wanted.items() if k in i)]
        skip = int(query.get("$skip", "0") or 0)
        page = items[skip:skip + self.page_size]
        more = skip + self.page_size < len(items)
        link = (f"{emu.url}{PRICES_PATH}?$filter={quote(query.get('$filter', ''))}&$skip={skip + self.page_size}"
                if more else None)
        return {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
                "Items": page, "NextPageLink": link, "Count": len(page)}


def price_item(arm_sku: str, region: str, price: float, *, sku_name: str, product: str) -> Dict[str, Any]:
    """One meter, in the Retail Prices API's item shape."""
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
            "armRegionName": region, "location": region, "effectiveStartDate": "2024-01-01T00:00:00Z",
            "meterId": f"meter-{arm_sku}-{sku_name}".replace(" ", "-"), "meterName": sku_name,
            "productId": "DZH318Z0BQPS", "skuId": "DZH318Z0BQPS/00TG", "productName": product,
            "skuName": sku_name, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
            "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": "Consumption",
            "isPrimaryMeterRegion": True, "armSkuName": arm_sku}


def vm_meters(arm_sku: str, region: str, linux: float, *, windows: float, low_priority: float,
              spot: float) -> List[Dict[str, Any]]:
    """A VM size's meters as the API lists them: Windows first, then Linux spot, low priority, pay as you go
    (so a client must page past the first page and pick the Linux dedicated meter)."""
    short = arm_sku.removeprefix("Standard_").replace("_", " ")
    series = "Virtual Machines " + short.split(" ", 1)[-1] + " Series"
    return [price_item(arm_sku, region, windows, sku_name=short, product=series + " Windows"),
            price_item(arm_sku, region, spot, sku_name=short + " Spot", product=series),
            price_item(arm_sku, region, low_priority, sku_name=short + " Low Priority", product=series),
            price_item(arm_sku, region, linux, sku_name=short, product=series)]


def set_compute(emu: Any, name: str, **changes: Any) -> Dict[str, Any]:
    """Change a compute's AmlCompute properties (camelCase keys of Compute/get/AmlCompute.json's
    properties.properties, e.g. allocationState="Resizing", targetNodeCount=2, errors=[...]); returns it."""
    with emu._lock:
        inner = emu.computes[name]["properties"]["properties"]
        for key, value in changes.items():
            if key in ("maxNodeCount", "minNodeCount"):
                inner["scaleSettings"][key] = value
            elif key == "nodeStateCounts":
                inner["nodeStateCounts"].update(value)
            else:
                inner[key] = value
        return emu.computes[name]
