"""What each C symbol of the NVML stand-in answers: the per-symbol half of ``tests/fakes/nvml_driver.py``.

Every answer reads the personality (``tests/fakes/personalities.py``) and writes the caller's
out-parameters at their raw addresses, returning an ``nvmlReturn_t``; a value the capture shows as
"N/A" is NotSupported. Signatures follow nvml.h: ``P`` a pointer, ``_UInt``/``_Int`` an integer.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from tests.fakes import nvml_abi as abi
from tests.fakes.nvml_driver import (
    _MARGIN_V1,
    _MEMORY_V2,
    _P,
    _PROCESSES_UTIL_V1,
    _TEMPERATURE_V1,
    INVALID,
    NOT_AVAILABLE_ULL,
    NOT_SUPPORTED,
    OK,
    _Dev,
    _Int,
    _Margin,
    _MemoryV1,
    _MemoryV2,
    _mw,
    _ProcessesUtilInfo,
    _ProcessUtilInfoV1,
    _ProcessUtilSample,
    _put,
    _put_text,
    _TemperatureV1,
    _text,
    _UInt,
    _Utilization,
)

if TYPE_CHECKING:
    from tests.fakes.nvml_driver import NvmlDriver

_U = ctypes.c_uint
_ULL = ctypes.c_ulonglong
_VERSION_MISMATCH = abi.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


def symbol_table(d: NvmlDriver) -> dict[str, tuple[tuple[Any, ...], Any, Any]]:
    """{C symbol: (argtypes, Python thunk, restype)} for every symbol the stand-in models."""
    gpus = d.personality.gpus
    driver = d.personality.driver
    table: dict[str, tuple[tuple[Any, ...], Any, Any]] = {}

    def device(name: str, impl: Any, *argtypes: Any) -> None:
        table[name] = d._device(name, impl, *argtypes)

    def system(name: str, impl: Any, *argtypes: Any, restype: Any = ctypes.c_int) -> None:
        table[name] = d._system(name, impl, *argtypes, restype=restype)

    def scalar(name: str, ctype: Any, value: Any) -> None:
        """A call with one out-parameter: ``value(dev)``, None meaning NotSupported."""
        device(name, lambda dev, ptr: _put(ptr, ctype, value(dev)), _P)

    # --- library and system ---------------------------------------------------------------------

    def init(*_: Any) -> int:
        d.init_count += 1
        return OK

    def shutdown() -> int:
        d.init_count -= 1
        return OK

    def process_name(pid: int, buf: int, size: int) -> int:
        for spec in gpus:
            for proc in [*spec.processes, *(p for m in spec.mig_devices for p in m.processes)]:
                if proc.pid == pid:
                    return _put_text(buf, size, proc.name.encode())
        return abi.NVML_ERROR_NOT_FOUND

    def handle_out(dev: _Dev | None, out: int | None) -> int:
        if dev is None:
            return abi.NVML_ERROR_NOT_FOUND
        if d.is_lost(dev.gpu):
            return abi.NVML_ERROR_GPU_IS_LOST
        return _put(out, ctypes.c_void_p, d.handle_of(dev))

    def by_index(index: int, out: int) -> int:
        if not 0 <= index < len(gpus):
            return INVALID
        return handle_out(d.current_handle(index), out)

    def by_text(match: Any) -> Any:
        def impl(text_ptr: int | None, out: int) -> int:
            if not text_ptr:
                return INVALID
            text = ctypes.string_at(text_ptr).decode(errors="replace")
            for gpu, spec in enumerate(gpus):
                if match(spec, text):
                    return handle_out(d.current_handle(gpu), out)
                for index, mig in enumerate(spec.mig_devices):
                    if mig.uuid == text:
                        return handle_out(d.mig_handle(gpu, index), out)
            return abi.NVML_ERROR_NOT_FOUND
        return impl

    system("nvmlInit", init)
    system("nvmlInit_v2", init)
    system("nvmlInitWithFlags", init, _UInt)
    system("nvmlShutdown", shutdown)
    system("nvmlErrorString", d.error_string, _Int, restype=ctypes.c_void_p)
    system("nvmlSystemGetDriverVersion", lambda buf, size: _put_text(buf, size, driver.version.encode()), _P, _UInt)
    system("nvmlSystemGetNVMLVersion", lambda buf, size: _put_text(buf, size, driver.nvml_version.encode()),
           _P, _UInt)
    for name in ("nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"):
        system(name, lambda ptr: _put(ptr, ctypes.c_int, driver.cuda_version), _P)
    system("nvmlSystemGetProcessName", process_name, _UInt, _P, _UInt)
    system("nvmlDeviceGetCount_v2", lambda ptr: _put(ptr, _U, len(gpus)), _P)
    system("nvmlDeviceGetHandleByIndex_v2", by_index, _UInt, _P)
    system("nvmlDeviceGetHandleByUUID", by_text(lambda spec, text: spec.uuid == text), _P, _P)
    system("nvmlDeviceGetHandleByPciBusId_v2", by_text(lambda spec, text: spec.bus_id.lower() == text.lower()),
           _P, _P)

    # --- identity -------------------------------------------------------------------------------

    def name_of(dev: _Dev) -> bytes:
        if dev.mig is not None:
            return _text(dev.spec.name) + f" MIG {dev.mig.profile}".encode()
        return _text(dev.spec.name)

    def pci_info(dev: _Dev, ptr: int | None) -> int:
        if not ptr:
            return INVALID
        info = abi.nvmlPciInfo_t.from_address(ptr)
        domain, bus, rest = dev.spec.bus_id.split(":")
        info.busId = dev.spec.bus_id.encode()
        info.busIdLegacy = f"{int(domain, 16):04x}:{bus}:{rest}".upper().encode()[:15]
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        return OK

    device("nvmlDeviceGetName", lambda dev, buf, size: _put_text(buf, size, name_of(dev)), _P, _UInt)
    device("nvmlDeviceGetUUID",
           lambda dev, buf, size: _put_text(buf, size, (dev.mig.uuid if dev.mig else dev.spec.uuid).encode()),
           _P, _UInt)
    device("nvmlDeviceGetVbiosVersion", lambda dev, buf, size: _put_text(buf, size, dev.spec.vbios.encode()),
           _P, _UInt)
    scalar("nvmlDeviceGetIndex", _U, lambda dev: dev.gpu)
    device("nvmlDeviceGetPciInfo_v3", pci_info, _P)
    scalar("nvmlDeviceGetPersistenceMode", _U, lambda dev: int(dev.spec.persistence))
    scalar("nvmlDeviceGetArchitecture", _U, lambda dev: dev.spec.architecture)

    # --- memory and utilization -----------------------------------------------------------------

    def memory_v1(dev: _Dev, ptr: int | None) -> int:
        if not ptr:
            return INVALID
        total, reserved, used, free = d.memory_bytes(dev)
        out = _MemoryV1.from_address(ptr)
        out.total, out.used, out.free = total, used + reserved, free  # v1 folds reserved into used
        return OK

    def memory_v2(dev: _Dev, ptr: int | None) -> int:
        if not ptr:
            return INVALID
        out = _MemoryV2.from_address(ptr)
        if out.version != _MEMORY_V2:
            return _VERSION_MISMATCH
        out.total, out.reserved, out.used, out.free = d.memory_bytes(dev)
        return OK

    def utilization(dev: _Dev, ptr: int | None) -> int:
        spec = dev.spec
        if spec.utilization_gpu_pct is None or spec.utilization_mem_pct is None:
            return NOT_SUPPORTED  # a MIG parent, or a GPU without the counters (Kepler on 470)
        if not ptr:
            return INVALID
        out = _Utilization.from_address(ptr)
        out.gpu, out.memory = spec.utilization_gpu_pct, spec.utilization_mem_pct
        return OK

    device("nvmlDeviceGetMemoryInfo", memory_v1, _P)
    device("nvmlDeviceGetMemoryInfo_v2", memory_v2, _P)
    device("nvmlDeviceGetUtilizationRates", utilization, _P)

    # --- temperature ----------------------------------------------------------------------------

    def temperature(dev: _Dev, sensor: int, ptr: int | None) -> int:
        if sensor != abi.NVML_TEMPERATURE_GPU:
            return INVALID
        return _put(ptr, _U, dev.spec.temperature_c)

    def temperature_v(dev: _Dev, ptr: int | None) -> int:
        if not ptr:
            return INVALID
        out = _TemperatureV1.from_address(ptr)
        if out.version != _TEMPERATURE_V1:
            return _VERSION_MISMATCH
        if out.sensorType != abi.NVML_TEMPERATURE_GPU:
            return INVALID
        out.temperature = dev.spec.temperature_c
        return OK

    def threshold(dev: _Dev, kind: int, ptr: int | None) -> int:
        spec = dev.spec
        value = {
            abi.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: spec.temp_shutdown_c,
            abi.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: spec.temp_slowdown_c,
            abi.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: spec.temp_max_operating_c,
            abi.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR: spec.target_temp_c,
            abi.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: spec.temp_memory_max_c,
        }.get(kind)
        return _put(ptr, _U, value)

    def margin(dev: _Dev, ptr: int | None) -> int:
        if dev.spec.tlimit_margin_c is None:
            return NOT_SUPPORTED
        if not ptr:
            return INVALID
        out = _Margin.from_address(ptr)
        if out.version != _MARGIN_V1:
            return _VERSION_MISMATCH
        out.marginTemperature = dev.spec.tlimit_margin_c
        return OK

    device("nvmlDeviceGetTemperature", temperature, _UInt, _P)
    device("nvmlDeviceGetTemperatureV", temperature_v, _P)
    device("nvmlDeviceGetTemperatureThreshold", threshold, _UInt, _P)
    device("nvmlDeviceGetMarginTemperature", margin, _P)

    # --- power ----------------------------------------------------------------------------------

    def constraints(dev: _Dev, low: int | None, high: int | None) -> int:
        spec = dev.spec
        if spec.power_limit_min_w is None or spec.power_limit_max_w is None:
            return NOT_SUPPORTED
        code = _put(low, _U, _mw(spec.power_limit_min_w))
        return code if code != OK else _put(high, _U, _mw(spec.power_limit_max_w))

    scalar("nvmlDeviceGetPowerUsage", _U, d.power_mw)
    scalar("nvmlDeviceGetTotalEnergyConsumption", _ULL, d.energy_mj)
    scalar("nvmlDeviceGetEnforcedPowerLimit", _U, lambda dev: _mw(dev.spec.power_limit_w))
    scalar("nvmlDeviceGetPowerManagementLimit", _U,
           lambda dev: _mw(dev.spec.power_limit_w) if dev.spec.power_limit_settable else None)
    scalar("nvmlDeviceGetPowerManagementDefaultLimit", _U, lambda dev: _mw(dev.spec.power_limit_default_w))
    device("nvmlDeviceGetPowerManagementLimitConstraints", constraints, _P, _P)

    # --- clocks, fan, P-state, reasons ------------------------------------------------------------

    def clock_of(dev: _Dev, kind: int, which: str) -> tuple[bool, int | None]:
        spec = dev.spec
        known = {
            "current": {0: spec.sm_clock_mhz, 1: spec.sm_clock_mhz, 2: spec.mem_clock_mhz, 3: None},
            "max": {0: spec.sm_clock_max_mhz, 1: spec.sm_clock_max_mhz, 2: spec.mem_clock_max_mhz, 3: None},
            "boost": {0: spec.customer_boost_mhz, 1: spec.customer_boost_mhz, 2: None, 3: None},
        }[which]
        return kind in known, known.get(kind)

    def clock(which: str) -> Any:
        def impl(dev: _Dev, kind: int, ptr: int | None) -> int:
            valid, value = clock_of(dev, kind, which)
            return _put(ptr, _U, value) if valid else INVALID
        return impl

    def clock_by_id(dev: _Dev, kind: int, clock_id: int, ptr: int | None) -> int:
        which = {abi.NVML_CLOCK_ID_CURRENT: "current", abi.NVML_CLOCK_ID_CUSTOMER_BOOST_MAX: "boost"}.get(clock_id)
        if which is None:
            return NOT_SUPPORTED  # application clocks: not modelled
        return clock(which)(dev, kind, ptr)

    device("nvmlDeviceGetClockInfo", clock("current"), _UInt, _P)
    device("nvmlDeviceGetMaxClockInfo", clock("max"), _UInt, _P)
    device("nvmlDeviceGetClock", clock_by_id, _UInt, _UInt, _P)
    scalar("nvmlDeviceGetFanSpeed", _U, lambda dev: dev.spec.fan_pct)
    device("nvmlDeviceGetFanSpeed_v2",
           lambda dev, fan, ptr: _put(ptr, _U, dev.spec.fan_pct) if fan == 0 else INVALID, _UInt, _P)
    scalar("nvmlDeviceGetNumFans", _U, lambda dev: 1 if dev.spec.fan_pct is not None else None)
    scalar("nvmlDeviceGetPerformanceState", _U, lambda dev: dev.spec.pstate)
    for noun in ("Event", "Throttle"):
        scalar(f"nvmlDeviceGetCurrentClocks{noun}Reasons", _ULL, d.reasons)
        scalar(f"nvmlDeviceGetSupportedClocks{noun}Reasons", _ULL,
               lambda dev: 0x1FF if dev.spec.clock_event_reasons is not None else None)

    # --- PCIe -----------------------------------------------------------------------------------

    def throughput(dev: _Dev, counter: int, ptr: int | None) -> int:
        rates = {abi.NVML_PCIE_UTIL_TX_BYTES: dev.spec.pcie_tx_kb_s, abi.NVML_PCIE_UTIL_RX_BYTES: dev.spec.pcie_rx_kb_s}
        return _put(ptr, _U, rates[counter]) if counter in rates else INVALID

    device("nvmlDeviceGetPcieThroughput", throughput, _UInt, _P)
    scalar("nvmlDeviceGetCurrPcieLinkGeneration", _U, lambda dev: dev.spec.pcie_gen)
    scalar("nvmlDeviceGetCurrPcieLinkWidth", _U, lambda dev: dev.spec.pcie_width)
    scalar("nvmlDeviceGetMaxPcieLinkGeneration", _U, lambda dev: dev.spec.pcie_gen_max)
    scalar("nvmlDeviceGetMaxPcieLinkWidth", _U, lambda dev: dev.spec.pcie_width_max)

    # --- field values ---------------------------------------------------------------------------

    def field_answer(dev: _Dev, field_id: int) -> tuple[int, str, int | None] | None:
        """(valueType, union member, value) for a field this GPU answers; None: NotSupported."""
        spec = dev.spec
        if dev.mig is not None or field_id not in spec.fields:
            return None
        signed = (abi.NVML_VALUE_TYPE_SIGNED_INT, "siVal")
        answers: dict[int, tuple[int, str, int | None]] = {
            abi.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (abi.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal",
                                                       d.energy_mj(dev)),
            abi.NVML_FI_DEV_POWER_AVERAGE: (abi.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", d.power_mw(dev)),
            abi.NVML_FI_DEV_POWER_INSTANT: (abi.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", d.power_mw(dev)),
            abi.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT: (*signed, spec.tlimit_shutdown_c),
            abi.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT: (*signed, spec.tlimit_slowdown_c),
            abi.NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT: (*signed, spec.tlimit_mem_max_c),
            abi.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT: (*signed, spec.tlimit_gpu_max_c),
            abi.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: (abi.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal",
                                                  d.pcie_bytes(spec.pcie_tx_kb_s)),
            abi.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: (abi.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal",
                                                  d.pcie_bytes(spec.pcie_rx_kb_s)),
        }
        for counter_id, ns_per_s in spec.clock_event_ns_per_s.items():
            answers[counter_id] = (abi.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", d.counter_ns(ns_per_s))
        for counter_id, bit in spec.counter_field_bits.items():
            answers[counter_id] = (abi.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal", d.bit_ns(dev, bit))
        for constant_id, number in spec.constant_fields.items():
            answers[constant_id] = (abi.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal", number)
        if spec.memory_temperature_c is not None:
            answers[abi.NVML_FI_DEV_MEMORY_TEMP] = (abi.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal",
                                                    spec.memory_temperature_c)
        answer = answers.get(field_id)
        return answer if answer is not None and answer[2] is not None else None

    def field_values(dev: _Dev, count: int, ptr: int | None) -> int:
        if not ptr or count <= 0:
            return INVALID
        d.on_field_call()
        for entry in (abi.c_nvmlFieldValue_t * count).from_address(ptr):
            entry.timestamp, entry.latencyUsec = d.now_us, 0
            answer = field_answer(dev, int(entry.fieldId))
            if answer is None:
                entry.nvmlReturn = NOT_SUPPORTED
                continue
            entry.valueType, member, number = answer
            setattr(entry.value, member, number)
            entry.nvmlReturn = OK
        return OK

    device("nvmlDeviceGetFieldValues", field_values, _Int, _P)

    # --- processes ------------------------------------------------------------------------------

    def running(kind: str, suffix: str) -> Any:
        def impl(dev: _Dev, count_ptr: int | None, infos: int | None) -> int:
            if not count_ptr:
                return INVALID
            procs = d.processes(dev, kind)
            capacity = ctypes.c_uint.from_address(count_ptr).value
            ctypes.c_uint.from_address(count_ptr).value = len(procs)
            if not procs:
                return OK
            if not infos or capacity < len(procs):
                return abi.NVML_ERROR_INSUFFICIENT_SIZE
            layout = d.process_layout(suffix)
            entries = (layout * len(procs)).from_address(infos)
            for entry, proc in zip(entries, procs, strict=True):
                entry.pid = proc.pid
                entry.usedGpuMemory = round(proc.used_mib * 1024**2) if proc.used_mib is not None else NOT_AVAILABLE_ULL
                if suffix:
                    entry.gpuInstanceId, entry.computeInstanceId = proc.gpu_instance_id, proc.compute_instance_id
            return OK
        return impl

    for kind, noun in (("compute", "Compute"), ("graphics", "Graphics"), ("mps", "MPSCompute")):
        for suffix in ("", "_v2", "_v3"):
            device(f"nvmlDeviceGet{noun}RunningProcesses{suffix}", running(kind, suffix), _P, _P)

    # --- per-process utilization: the driver's sample buffer since lastSeenTimeStamp ---------------

    def process_utilization(dev: _Dev, out: int | None, count_ptr: int | None, last_seen_us: int) -> int:
        if not count_ptr:
            return INVALID
        samples = d.util_since(dev, last_seen_us)
        if samples is None:
            return NOT_SUPPORTED
        if not samples:
            return abi.NVML_ERROR_NOT_FOUND
        capacity = ctypes.c_uint.from_address(count_ptr).value
        ctypes.c_uint.from_address(count_ptr).value = len(samples)
        if not out or capacity < len(samples):
            return abi.NVML_ERROR_INSUFFICIENT_SIZE
        for entry, (stamp, pid, sm, mem, enc, dec) in zip(
                (_ProcessUtilSample * len(samples)).from_address(out), samples, strict=True):
            entry.pid, entry.timeStamp = pid, stamp
            entry.smUtil, entry.memUtil, entry.encUtil, entry.decUtil = sm, mem, enc, dec
        return OK

    def processes_utilization_info(dev: _Dev, info_ptr: int | None) -> int:
        if not info_ptr:
            return INVALID
        info = _ProcessesUtilInfo.from_address(info_ptr)
        if info.version != _PROCESSES_UTIL_V1:
            return _VERSION_MISMATCH
        samples = d.util_since(dev, int(info.lastSeenTimeStamp))
        if samples is None:
            return NOT_SUPPORTED
        if not samples:
            return abi.NVML_ERROR_NOT_FOUND
        capacity = info.processSamplesCount
        info.processSamplesCount = len(samples)
        if not info.procUtilArray or capacity < len(samples):
            return abi.NVML_ERROR_INSUFFICIENT_SIZE
        for entry, (stamp, pid, sm, mem, enc, dec) in zip(
                (_ProcessUtilInfoV1 * len(samples)).from_address(info.procUtilArray), samples, strict=True):
            entry.timeStamp, entry.pid = stamp, pid
            entry.smUtil, entry.memUtil, entry.encUtil, entry.decUtil = sm, mem, enc, dec
            entry.jpgUtil = entry.ofaUtil = 0
        return OK

    device("nvmlDeviceGetProcessUtilization", process_utilization, _P, _P, _ULL)
    device("nvmlDeviceGetProcessesUtilizationInfo", processes_utilization_info, _P)

    # --- MIG ------------------------------------------------------------------------------------

    def mig_mode(dev: _Dev, current: int | None, pending: int | None) -> int:
        mode = dev.spec.mig_mode
        if mode is None:
            return NOT_SUPPORTED
        code = _put(current, _U, mode[0])
        return code if code != OK else _put(pending, _U, mode[1])

    def mig_by_index(dev: _Dev, index: int, out: int | None) -> int:
        mode = dev.spec.mig_mode
        if mode is None:
            return NOT_SUPPORTED
        if mode[0] != 1:
            return INVALID
        if not 0 <= index < len(dev.spec.mig_devices):
            return abi.NVML_ERROR_NOT_FOUND
        return handle_out(d.mig_handle(dev.gpu, index), out)

    def parent(dev: _Dev, out: int | None) -> int:
        return handle_out(dev.parent, out) if dev.parent is not None else INVALID

    device("nvmlDeviceGetMigMode", mig_mode, _P, _P)
    scalar("nvmlDeviceGetMaxMigDeviceCount", _U,
           lambda dev: dev.spec.max_mig_devices if dev.spec.mig_mode is not None else None)
    device("nvmlDeviceGetMigDeviceHandleByIndex", mig_by_index, _UInt, _P)
    scalar("nvmlDeviceIsMigDeviceHandle", _U, lambda dev: int(dev.mig is not None))
    device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", parent, _P)
    scalar("nvmlDeviceGetGpuInstanceId", _U, lambda dev: dev.mig.gpu_instance_id if dev.mig else None)
    scalar("nvmlDeviceGetComputeInstanceId", _U, lambda dev: dev.mig.compute_instance_id if dev.mig else None)

    from tests.fakes.nvml_driver_gpm import gpm_symbols  # GPU performance monitoring, split out for size

    table.update(gpm_symbols(d))
    return table
