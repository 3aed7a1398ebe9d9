"""One reading of one GPU: the field-values batch, the per-call metrics, PCIe rates and clock-event times.

Per tick and GPU six calls: one ``nvmlDeviceGetFieldValues`` batch (power, energy, PCIe byte
and clock-event counters) plus utilization, memory, temperature, SM clock and clock-event
reasons. The fan and P-state are refreshed on a slower period, the memory clock there too when the
P-state moved (it sets the memory clock), and with the PCIe link on a slower period still. A newer
call that is missing falls back to its older stand-in. The batch goes through the driver's C symbol
into a request array kept per GPU, so a tick builds no ctypes array and no id list of its own.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from desktop.telemetry.model import GpuSample
from desktop.telemetry.nvml.counters import ALL_COUNTER_FIELD_IDS
from desktop.telemetry.nvml.device import NvmlDevice
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING, NvmlLost
from desktop.telemetry.nvml.values import (
    FIELD_ENERGY_MJ,
    FIELD_MEMORY_TEMP_C,
    FIELD_PCIE_RX_BYTES,
    FIELD_PCIE_TX_BYTES,
    FIELD_POWER_AVERAGE_MW,
    TICK_FIELDS,
    as_float,
    as_int,
    as_mib,
    as_number,
    field_number,
    plausible_power_w,
)

log = logging.getLogger(__name__)

#: The PCIe link (gen/width) is re-read on every n-th slow refresh: it mostly answers "is my
#: GPU on the link it should be", and its two calls would otherwise cost more than the fan.
LINK_EVERY_SLOW: Final = 4
_COUNTER_32_BIT: Final = 2.0**32


class _Value(ctypes.Union):
    """``nvmlValue_t``: the member the entry's ``valueType`` names holds the value."""

    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong), ("siVal", ctypes.c_int),
                ("usVal", ctypes.c_ushort)]


def _counter_delta(now: float, before: float) -> float | None:
    """How far a cumulative byte counter moved; None when it was reset.

    Some drivers keep the PCIe byte counters in 32 bits inside the 64-bit field: they wrap at
    2^32, so a counter below 2^32 that went back moved on modulo 2^32 (a reset there cannot be
    told from a wrap, and costs at most one reading of under 4 GiB). A counter already past 2^32
    that went back was reset (a driver reload).
    """
    if now >= before:
        return now - before
    if before < _COUNTER_32_BIT:
        return now - before + _COUNTER_32_BIT
    return None


def _asker(gateway: NvmlGateway, dev: NvmlDevice) -> Callable[..., Any]:
    """``ask(key, func, *args)``: ``func(dev.handle, *args)`` through the gateway, remembered under ``key``."""
    def ask(key: str, func: str, *args: Any, **kwargs: Any) -> Any:
        return gateway.device_call(dev.calls, key, func, dev.handle, *args, **kwargs)

    return ask


Attempt = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def _first(gateway: NvmlGateway, dev: NvmlDevice, attempts: Sequence[Attempt]) -> Any:
    """The first attempt that answers; a newer call missing or failing falls back to the older."""
    for key, func, args, kwargs in attempts:
        if gateway.skips(dev.calls, key):
            continue
        value = gateway.device_call(dev.calls, key, func, dev.handle, *args, **kwargs)
        if value is not MISSING or (not dev.calls.is_unsupported(key) and dev.calls.failure(key) is None):
            return value  # answered, or failed transiently: no point asking the older call now
    return MISSING


def _unsupported_fields(dev: NvmlDevice) -> set[int]:
    return {int(key[6:]) for key in dev.calls.unsupported if key.startswith("field:") and key[6:].isdigit()}


class FieldValue(ctypes.Structure):
    """``nvmlFieldValue_t`` as nvml.h lays it out (the binding's struct converts every attribute it reads)."""

    _fields_ = [("fieldId", ctypes.c_uint32), ("scopeId", ctypes.c_uint32), ("timestamp", ctypes.c_int64),
                ("latencyUsec", ctypes.c_int64), ("valueType", ctypes.c_uint), ("nvmlReturn", ctypes.c_uint),
                ("value", _Value)]


def _request(dev: NvmlDevice, wanted: list[int]) -> Any:
    """The field-values request array for ``wanted``, built once and kept while the ids stay the same."""
    ids = tuple(wanted)
    kept = dev.field_request
    if kept is not None and kept[0] == ids:
        return kept[1]
    array = (FieldValue * len(ids))()
    for entry, fid in zip(array, ids, strict=True):
        entry.fieldId = fid
    dev.field_request = (ids, array)
    return array


def _ask_fields(gateway: NvmlGateway, dev: NvmlDevice, wanted: list[int]) -> Any:
    """One ``nvmlDeviceGetFieldValues`` for ``wanted``: through the C symbol into the kept array, else the wrapper."""
    array = _request(dev, wanted)
    answered = gateway.c_call(dev.calls, "fields", "nvmlDeviceGetFieldValues", dev.handle,
                              ctypes.c_int32(len(wanted)), ctypes.byref(array))
    if answered is None:
        return _asker(gateway, dev)("fields", "nvmlDeviceGetFieldValues", wanted)
    return array if answered is True else MISSING


def _wanted_fields(gateway: NvmlGateway, dev: NvmlDevice) -> list[int]:
    """The field ids to ask this tick: kept while nothing was learnt (no id newly NotSupported, rejected as
    a counter, or resting after a failure), since working it out again costs more than the call's setup."""
    calls = dev.calls
    key = (calls.changes, len(dev.counters.rejected))
    resting = any(k.startswith("field:") for k in calls.failed) if calls.failed else False
    kept = dev.wanted_fields
    if kept is not None and kept[0] == key and not resting:
        return kept[1]
    unsupported = _unsupported_fields(dev)
    wanted = [f for f in (*(f for f in TICK_FIELDS if f not in unsupported), *dev.counters.fields(unsupported))
              if not gateway.skips(calls, f"field:{f}")]
    dev.wanted_fields = None if resting else (key, wanted)
    return wanted


def _field_values(gateway: NvmlGateway, dev: NvmlDevice) -> dict[int, tuple[float, float | None]]:
    """Ask the batch call for every field this GPU still answers: {field id: (value, timestamp_s)}."""
    wanted = _wanted_fields(gateway, dev)
    if not wanted:
        return {}
    values = _ask_fields(gateway, dev, wanted)
    if values is MISSING:
        if dev.calls.is_unsupported("fields"):
            if ALL_COUNTER_FIELD_IDS.intersection(wanted):
                # Perhaps refused whole over a counter id this driver does not know: once more without them.
                dev.calls.forget_unsupported("fields")
                dev.calls.mark_unsupported(*(f"field:{f}" for f in ALL_COUNTER_FIELD_IDS))
                return _field_values(gateway, dev)
            # The driver has no batch call: every field falls back.
            dev.calls.mark_unsupported(*(f"field:{f}" for f in (*TICK_FIELDS, *ALL_COUNTER_FIELD_IDS)))
        return {}
    out: dict[int, tuple[float, float | None]] = {}
    calls = dev.calls
    for requested, entry in zip(wanted, values, strict=False):
        code = int(getattr(entry, "nvmlReturn", 999))
        # An answer clears a remembered failure; with none remembered there is nothing to file.
        if (code != 0 or calls.failed) and not gateway.field_answered(calls, requested, code):
            continue
        value = field_number(entry)
        if value is not None:
            stamp_us = getattr(entry, "timestamp", 0)
            out[requested] = (value, stamp_us / 1e6 if stamp_us else None)
            if isinstance(stamp_us, int) and stamp_us > dev.last_field_stamp_us:
                dev.last_field_stamp_us = stamp_us
    return out


def _plausible_power_w(dev: NvmlDevice, power_w: float | None) -> float | None:
    """The reading, or None (logged once per GPU) where it is far above the board's limits."""
    info = dev.info
    checked = plausible_power_w(power_w, info.power_limit_max_w, info.power_limit_enforced_w)
    if checked is None and power_w is not None and not dev.bogus_power_logged:
        dev.bogus_power_logged = True
        log.warning("GPU %d reports %.0f W, far above its %s W limit: shown as n/a", dev.index, power_w,
                    info.power_limit_max_w or info.power_limit_enforced_w)
    return checked


def read_sample(gateway: NvmlGateway, dev: NvmlDevice, now_s: float | None, slow_period_s: float) -> GpuSample:
    """One reading; ``now_s=None`` is the priming read at open (everything, slow metrics too)."""
    ask = _asker(gateway, dev)
    dev.calls.begin_read()
    fields = _field_values(gateway, dev)
    slow = now_s is None or dev.slow_at_s is None or not 0 <= now_s - dev.slow_at_s < slow_period_s
    if slow:
        dev.slow_at_s = now_s
        _read_slow(gateway, dev, has_pcie_counters=FIELD_PCIE_TX_BYTES in fields and FIELD_PCIE_RX_BYTES in fields)

    power = fields.get(FIELD_POWER_AVERAGE_MW)
    power_mw = power[0] if power else as_number(ask("power", "nvmlDeviceGetPowerUsage"))
    power_w = _plausible_power_w(dev, power_mw / 1000.0 if power_mw is not None else None)
    energy = fields.get(FIELD_ENERGY_MJ)
    energy_mj = (energy[0] if energy
                 else as_number(ask("energy", "nvmlDeviceGetTotalEnergyConsumption")))
    rx_kib_s, tx_kib_s = _pcie_rates(dev, fields, now_s)
    memory_temp = fields.get(FIELD_MEMORY_TEMP_C)
    # 0 °C from an HBM sensor is no reading (a GPU without one may answer 0 rather than NotSupported).
    dev.memory_temperature_c = memory_temp[0] if memory_temp and 0.0 < memory_temp[0] < 150.0 else None

    # Under MIG the parent's utilization is not available (some drivers answer 0): not asked.
    util = MISSING if dev.info.mig_enabled else ask("util", "nvmlDeviceGetUtilizationRates")
    mem_attempts: list[Attempt] = []
    version = gateway.binding_attr("nvmlMemory_v2")
    if version is not None:
        mem_attempts.append(("mem_v2", "nvmlDeviceGetMemoryInfo", (), {"version": version}))
    else:
        dev.calls.mark_unsupported("mem_v2")
    mem_attempts.append(("mem_v1", "nvmlDeviceGetMemoryInfo", (), {}))
    mem = _first(gateway, dev, mem_attempts)
    sensor = gateway.const("NVML_TEMPERATURE_GPU", 0)
    temp = _first(gateway, dev, [("temp_v", "nvmlDeviceGetTemperatureV", (sensor,), {}),
                                 ("temp_legacy", "nvmlDeviceGetTemperature", (sensor,), {})])
    sm_clock = ask("sm_clock", "nvmlDeviceGetClockInfo", gateway.const("NVML_CLOCK_SM", 1))
    reasons = _first(gateway, dev, [("reasons", "nvmlDeviceGetCurrentClocksEventReasons", (), {}),
                                    ("reasons_legacy", "nvmlDeviceGetCurrentClocksThrottleReasons", (), {})])
    counted: dict[str, Any] = _clock_event_seconds(dev, fields, as_int(reasons), now_s)
    if dev.calls.every_query_failed():
        # Not one failing sensor but the whole GPU (a fall off the bus often answers UNKNOWN):
        # lost, so that reinit() asks for a fresh handle.
        raise NvmlLost(f"every query failed: {dev.calls.errors[0]}")
    return GpuSample(
        utilization_gpu_pct=as_number(getattr(util, "gpu", None)) if util is not MISSING else None,
        utilization_mem_pct=as_number(getattr(util, "memory", None)) if util is not MISSING else None,
        vram_used_mib=as_mib(getattr(mem, "used", None)) if mem is not MISSING else None,
        vram_free_mib=as_mib(getattr(mem, "free", None)) if mem is not MISSING else None,
        temperature_c=as_number(temp),
        power_w=power_w,
        energy_mj=energy_mj,
        sm_clock_mhz=as_number(sm_clock),
        mem_clock_mhz=as_float(dev.slow.get("mem_clock")),
        fan_pct=as_float(dev.slow.get("fan")),
        clock_event_reasons=as_int(reasons),
        pcie_rx_kib_s=rx_kib_s,
        pcie_tx_kib_s=tx_kib_s,
        pcie_gen=as_int(dev.slow.get("pcie_gen")),
        pcie_width=as_int(dev.slow.get("pcie_width")),
        pstate=as_int(dev.slow.get("pstate")),
        **counted,  # one GpuSample field per counter row of advisor/clock_events.py's table
    )


def _read_slow(gateway: NvmlGateway, dev: NvmlDevice, *, has_pcie_counters: bool) -> None:
    ask = _asker(gateway, dev)
    slow = dev.slow
    before = slow.get("pstate", MISSING)
    pstate = as_int(ask("pstate", "nvmlDeviceGetPerformanceState"))
    slow["pstate"] = pstate if pstate is not None and 0 <= pstate <= 15 else None  # 32 = unknown
    # The memory clock is set by the P-state: asked when that moved (or is unknown), else with the link.
    if slow["pstate"] is None or slow["pstate"] != before or dev.slow_count % LINK_EVERY_SLOW == 0:
        slow["mem_clock"] = as_number(ask("mem_clock", "nvmlDeviceGetClockInfo", gateway.const("NVML_CLOCK_MEM", 2)))
    slow["fan"] = as_number(ask("fan", "nvmlDeviceGetFanSpeed"))
    if dev.slow_count % LINK_EVERY_SLOW == 0:
        slow["pcie_gen"] = as_int(ask("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"))
        slow["pcie_width"] = as_int(ask("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"))
    dev.slow_count += 1
    if not has_pcie_counters:
        # The dedicated throughput call samples for 20 ms each: only on the slow period.
        tx, rx = gateway.const("NVML_PCIE_UTIL_TX_BYTES", 0), gateway.const("NVML_PCIE_UTIL_RX_BYTES", 1)
        slow["pcie_tx"] = as_number(ask("pcie_tx", "nvmlDeviceGetPcieThroughput", tx))
        slow["pcie_rx"] = as_number(ask("pcie_rx", "nvmlDeviceGetPcieThroughput", rx))


def _pcie_rates(dev: NvmlDevice, fields: dict[int, tuple[float, float | None]],
                now_s: float | None) -> tuple[float | None, float | None]:
    tx, rx = fields.get(FIELD_PCIE_TX_BYTES), fields.get(FIELD_PCIE_RX_BYTES)
    if tx is None or rx is None:
        dev.pcie_prev = None
        return as_float(dev.slow.get("pcie_rx")), as_float(dev.slow.get("pcie_tx"))
    stamp = tx[1] if tx[1] is not None else now_s
    prev, dev.pcie_prev = dev.pcie_prev, (stamp, tx[0], rx[0]) if stamp is not None else None
    if prev is None or stamp is None or stamp <= prev[0]:
        return None, None
    dt_s = stamp - prev[0]
    d_tx, d_rx = _counter_delta(tx[0], prev[1]), _counter_delta(rx[0], prev[2])
    if d_tx is None or d_rx is None:  # counter reset (driver reload): rates again from the next tick
        return None, None
    return d_rx / dt_s / 1024.0, d_tx / dt_s / 1024.0


def _clock_event_seconds(dev: NvmlDevice, fields: dict[int, tuple[float, float | None]], reasons: int | None,
                         now_s: float | None) -> dict[str, float | None]:
    """Seconds under each clock-event cause since the previous sample: deltas of NVML's ns counters.

    None for a cause without a counter, on the first sample (the priming read at open only
    learns what the GPU answers), after a counter reset, and while no field answered is believed
    (nvml/counters.py). A field found to be no time counter is remembered as NotSupported.
    """
    counters = dev.counters
    counted = counters.update(fields, reasons, now_s)
    # Filed again only when something changed (an id rejected, or what was unsupported forgotten), not every tick.
    if (dev.calls.changes, len(counters.rejected)) != dev.counters_dropped:
        dropped = counters.rejected | (ALL_COUNTER_FIELD_IDS - counters.candidate_ids)
        dev.calls.mark_unsupported(*(f"field:{f}" for f in dropped))
        dev.counters_dropped = (dev.calls.changes, len(counters.rejected))
    return counted
