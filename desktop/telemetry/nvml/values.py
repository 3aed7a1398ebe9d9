"""NVML facts without pynvml: field ids, the calls behind each metric, and decoding of answers.

Kept apart from the gateway (the calls) and the readers so the rules for reading NVML answers
are pure and small; nothing here touches a driver.
"""

from __future__ import annotations

from typing import Any, Final

from desktop.telemetry.model import GPU_METRIC_NAMES
from desktop.telemetry.nvml.counters import ALL_COUNTER_FIELDS
from desktop.telemetry.nvml.outcomes import MISSING

MIB: Final = 1024.0 * 1024.0

# Field ids (stable in the NVML ABI; spelled out so an older pynvml without the names still works).
FIELD_ENERGY_MJ: Final = 83  # NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
FIELD_POWER_AVERAGE_MW: Final = 185  # NVML_FI_DEV_POWER_AVERAGE (the 1 s average nvidia-smi shows)
FIELD_PCIE_TX_BYTES: Final = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES (cumulative)
FIELD_PCIE_RX_BYTES: Final = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES (cumulative)
FIELD_MEMORY_TEMP_C: Final = 82  # NVML_FI_DEV_MEMORY_TEMP (HBM; nvsmi_q_H200.txt "Memory Current Temp: 25 C")
# Time under each clock-event cause: cumulative ns counters whose field ids moved between driver
# branches; which ids are asked and believed is nvml/counters.py's business.
TICK_FIELDS: Final = (FIELD_POWER_AVERAGE_MW, FIELD_ENERGY_MJ, FIELD_PCIE_TX_BYTES, FIELD_PCIE_RX_BYTES,
                      FIELD_MEMORY_TEMP_C)


#: Each GpuSample field and the call keys that can answer it (any one not remembered as missing).
METRIC_SOURCES: Final[dict[str, tuple[str, ...]]] = {
    "utilization_gpu_pct": ("util",),
    "utilization_mem_pct": ("util",),
    "vram_used_mib": ("mem_v2", "mem_v1"),
    "vram_free_mib": ("mem_v2", "mem_v1"),
    "temperature_c": ("temp_v", "temp_legacy"),
    "power_w": (f"field:{FIELD_POWER_AVERAGE_MW}", "power"),
    "energy_mj": (f"field:{FIELD_ENERGY_MJ}", "energy"),
    "sm_clock_mhz": ("sm_clock",),
    "mem_clock_mhz": ("mem_clock",),
    "fan_pct": ("fan",),
    "clock_event_reasons": ("reasons", "reasons_legacy"),
    "pcie_rx_kib_s": (f"field:{FIELD_PCIE_RX_BYTES}", "pcie_rx"),
    "pcie_tx_kib_s": (f"field:{FIELD_PCIE_TX_BYTES}", "pcie_tx"),
    "pcie_gen": ("pcie_gen",),
    "pcie_width": ("pcie_width",),
    "pstate": ("pstate",),
    **{name: tuple(f"field:{fid}" for fid in ids) for name, ids in ALL_COUNTER_FIELDS.items()},
    # Estimated by the sampler from power and clock (desktop/telemetry/effective_load.py): there with power.
    "effective_load_pct": (f"field:{FIELD_POWER_AVERAGE_MW}", "power"),
}
assert tuple(METRIC_SOURCES) == GPU_METRIC_NAMES, "every GpuSample field needs an NVML source"


# --- value helpers -------------------------------------------------------------------------

NOT_AVAILABLE: Final = (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)  # NVML_VALUE_NOT_AVAILABLE (uint / ulonglong)


def as_number(value: Any) -> float | None:
    if value is MISSING or value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in NOT_AVAILABLE else float(value)
    if isinstance(value, float):
        return value
    return None


def as_int(value: Any) -> int | None:
    number = as_number(value)
    return int(number) if number is not None else None


def as_float(value: float | int | None) -> float | None:
    return float(value) if value is not None else None


def as_mib(value: Any) -> float | None:
    number = as_number(value)
    return number / MIB if number is not None else None


def as_text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").strip("\x00") or None
    if isinstance(value, str):
        return value or None
    return None


#: nvmlValueType_t -> the nvmlValue_t member that holds the value.
_VALUE_MEMBERS: Final = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def field_number(entry: Any) -> float | None:
    """Decode a c_nvmlFieldValue_t by its valueType."""
    member = _VALUE_MEMBERS.get(int(getattr(entry, "valueType", -1)))
    if member is None:
        return None
    return as_number(getattr(entry.value, member, None))


#: A power reading this many times the board's highest limit is a bad reading, not a fact: an
#: RTX 4090 Laptop has been seen answering ~593,000 mW at idle (REFERENCE.md, g-helper #5819),
#: while real excursions stay near the limit (an H100 PCIe peaks at 456 W on 350 W, 1.3x).
IMPLAUSIBLE_POWER_FACTOR: Final = 2.0


def plausible_power_w(power_w: float | None, limit_max_w: float | None, limit_enforced_w: float | None) -> float | None:
    """``power_w``, or None where it is far above every limit the board reports (a bogus scale)."""
    limits = [w for w in (limit_max_w, limit_enforced_w) if w is not None and w > 0]
    if power_w is None or not limits:
        return power_w
    return None if power_w > IMPLAUSIBLE_POWER_FACTOR * max(limits) else power_w
