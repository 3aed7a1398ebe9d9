"""Driver personalities for the NVML stand-in: what one real driver and its GPUs answer, as plain data.

Each personality is built from a real ``nvidia-smi -q`` capture in ``../shared/realdata/nvidia-smi-q/``
(the file is named in ``source``); where a capture cannot show something (MIG on a GPU captured with
MIG off, an R470 driver under a V100) the field says "modelled" and why. Units are the capture's
(MiB, W, MHz, °C); ``tests/fakes/nvml_driver.py`` turns them into NVML's (bytes, mW) and answers
NotSupported for every value that is ``None`` (nvidia-smi's "N/A").

``Personality.from_recording(doctor_json, samples)`` builds one from what ``rigscope doctor --json``
and ``rigscope sample --json`` printed on a real machine (the fixtures ``make device-check`` saves).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from desktop.telemetry.nvml.counters import id_sets_for
from tests.fakes import nvml_abi as abi

REALDATA = "../shared/realdata/nvidia-smi-q/"

# Symbols each driver branch lacks, as far as Rigscope, pynvml and nvitop ask for them ((u) = the
# branch it arrived in is not certain; the tests only rely on R470 lacking them all).
_NEWER_THAN_R470 = frozenset({
    "nvmlDeviceGetCurrentClocksEventReasons",  # R535 renamed "throttle" to "event"
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetMemoryInfo_v2",  # R510
    "nvmlDeviceGetComputeRunningProcesses_v3",  # R510
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetConfComputeMemSizeInfo",  # R535
    # GPU performance monitoring (u: R520, with CUDA 12.0).
    "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree", "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet", "nvmlGpmMigSampleGet",
})
_NEWER_THAN_R535 = frozenset({
    "nvmlDeviceGetProcessesUtilizationInfo",  # (u) R550: the v1 struct with a version field
    "nvmlDeviceGetTemperatureV",  # (u) R550
    "nvmlDeviceGetMarginTemperature",  # (u) R550
    # R550 also went back to 24-byte process entries; nvitop tells the branches apart by this symbol.
    "nvmlDeviceGetRunningProcessDetailList",
})
_NEWER_THAN_R570 = frozenset({"nvmlDeviceGetDriverModel_v2"})


@dataclass
class DriverSpec:
    """The driver branch: versions, the C symbols it lacks, the process-entry layout of its ``_v3`` calls."""

    version: str
    cuda_version: int  # as nvmlSystemGetCudaDriverVersion answers: 12040 = 12.4
    missing_symbols: frozenset[str] = frozenset()
    #: Bytes per entry that ``nvmlDevice*RunningProcesses_v3`` writes: 32 on R535 (with
    #: ``usedGpuCcProtectedMemory``), 24 before and after.
    process_v3_entry_bytes: int = 24

    @property
    def nvml_version(self) -> str:
        return f"{self.cuda_version // 1000}.{self.version}"


def r470(version: str = "470.256.02", cuda_version: int = 11040) -> DriverSpec:
    return DriverSpec(version, cuda_version, _NEWER_THAN_R470 | _NEWER_THAN_R535 | _NEWER_THAN_R570)


def r535(version: str = "535.161.07", cuda_version: int = 12020) -> DriverSpec:
    return DriverSpec(version, cuda_version, _NEWER_THAN_R535 | _NEWER_THAN_R570, process_v3_entry_bytes=32)


def r550(version: str = "550.127.05", cuda_version: int = 12040) -> DriverSpec:
    return DriverSpec(version, cuda_version, _NEWER_THAN_R570)


@dataclass
class ProcessSpec:
    pid: int
    #: None: the driver answers NVML_VALUE_NOT_AVAILABLE (always so under Windows WDDM, WSL included).
    used_mib: float | None = 1024.0
    kind: str = "compute"  # compute | graphics | both
    name: str = "python"
    gpu_instance_id: int = 0xFFFFFFFF  # NVML's "no MIG"
    compute_instance_id: int = 0xFFFFFFFF
    #: Utilization (%) the driver samples for it (nvidia-smi pmon's sm/mem/enc/dec); all 0: idle, and
    #: then left out of the driver's answer. The captures are idle ("Processes: None"): modelled.
    sm_util: int = 0
    mem_util: int = 0
    enc_util: int = 0
    dec_util: int = 0


@dataclass
class MigSpec:
    """One MIG device (a GPU instance with its compute instance) of a GPU in MIG mode."""

    profile: str  # e.g. "3g.71gb"
    uuid: str
    memory_total_mib: float
    memory_used_mib: float
    gpu_instance_id: int
    compute_instance_id: int = 0
    processes: list[ProcessSpec] = field(default_factory=list)


@dataclass
class GpuSpec:
    """One GPU as its capture shows it; ``None`` = "N/A" there (the driver answers NotSupported)."""

    source: str
    name: str | bytes  # bytes: what the driver writes, even when it is not valid UTF-8
    uuid: str
    bus_id: str
    vbios: str
    architecture: int
    persistence: bool
    memory_total_mib: float
    memory_reserved_mib: float | None  # None: no "Reserved" line (drivers before R510 fold it into used)
    memory_used_mib: float
    utilization_gpu_pct: int | None
    utilization_mem_pct: int | None
    temperature_c: int
    #: Absolute thresholds (Pascal/Volta/Ampere print "GPU Shutdown Temp: 90 C").
    temp_shutdown_c: int | None = None
    temp_slowdown_c: int | None = None
    temp_max_operating_c: int | None = None
    #: T.Limit form (Ada/Hopper/Blackwell): "GPU T.Limit Temp" is the margin now, the others are
    #: offsets from the limit (fields 193-196); the absolute thresholds are NotSupported there.
    tlimit_margin_c: int | None = None
    tlimit_shutdown_c: int | None = None
    tlimit_slowdown_c: int | None = None
    tlimit_gpu_max_c: int | None = None
    tlimit_mem_max_c: int | None = None
    target_temp_c: int | None = None
    #: "Free" as printed; nvidia-smi rounds each line to MiB, so the four need not add up (None: computed).
    memory_free_mib: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None  # "Current Power Limit" (enforced)
    power_limit_default_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    #: False where GetPowerManagementLimit is NotSupported (GeForce laptops: no `nvidia-smi -pl`).
    power_limit_settable: bool = True
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    customer_boost_mhz: int | None = None
    fan_pct: int | None = None
    pstate: int | None = None
    clock_event_reasons: int | None = None  # the mask; None: "Clocks Throttle Reasons: N/A"
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_tx_kb_s: int | None = None
    pcie_rx_kb_s: int | None = None
    energy_start_mj: int | None = 5_000_000  # None: no energy counter (before Volta)
    #: Field ids (nvmlDeviceGetFieldValues) this GPU and driver answer; the rest are NotSupported.
    fields: frozenset[int] = frozenset()
    #: Clock-event time counters (fields 74, 269-271; ns): how many ns each gains per second.
    #: None of the captures has them (the "Clocks Event Reasons Counters" block is 575+).
    clock_event_ns_per_s: dict[int, float] = field(default_factory=dict)
    processes: list[ProcessSpec] = field(default_factory=list)
    #: None: MIG not supported; otherwise [current, pending] (1 = enabled).
    mig_mode: tuple[int, int] | None = None
    mig_devices: list[MigSpec] = field(default_factory=list)
    max_mig_devices: int = 7
    #: Whether the driver samples per-process utilization here (nvmlDeviceGetProcessUtilization &
    #: co.): not on Kepler (NVML: "Maxwell or newer"), not under Windows WDDM (WSL included: nvidia-smi
    #: pmon is Linux-only), not on a MIG parent. nvidia-smi -q does not print it: modelled, not captured.
    process_utilization: bool = True
    #: GPU performance monitoring (Hopper, Blackwell): nvmlGpmQueryDeviceSupport's isSupportedDevice.
    gpm: bool = False
    #: GPM metric id -> the activity (%) its samples measure while the driver's clock runs (modelled:
    #: nvidia-smi -q does not print GPM metrics; an idle GPU reads 0).
    gpm_activity_pct: dict[int, float] = field(default_factory=dict)
    #: Modelled throttling: (from this second after the driver's start, reason mask) steps; empty: the
    #: mask above at every moment. The captures are idle, so any change under load is modelled.
    clock_event_timeline: tuple[tuple[float, int], ...] = ()
    #: Field id -> reason bit: a time counter (ns) that gains 1 s per second while the timeline has the bit.
    counter_field_bits: dict[int, int] = field(default_factory=dict)
    #: Field id -> the constant it answers (power smoothing settings at the other branch's counter ids).
    constant_fields: dict[int, int] = field(default_factory=dict)
    #: NVML_FI_DEV_MEMORY_TEMP (field 82, HBM temperature, "Memory Current Temp"); None: NotSupported.
    memory_temperature_c: int | None = None
    #: "Memory Max Operating Temp" (absolute, nvmlDeviceGetTemperatureThreshold MEM_MAX); None: NotSupported.
    temp_memory_max_c: int | None = None


@dataclass
class Quirks:
    """Real driver quirks, each off by default."""

    #: Width of the PCIe byte counters (fields 197/198): 32 makes them wrap every 4 GiB.
    pcie_counter_bits: int = 64
    #: The counters' value at time zero (set near 2**bits to see a wrap within a few ticks).
    pcie_counter_start: int = 10 * 1024**3
    #: {C symbol: NVML error} answered on every call on every GPU (a sensor that only says "ERR!").
    failing_symbols: dict[str, int] = field(default_factory=dict)
    #: A power reading on a bogus scale (mW), from nvmlDeviceGetPowerUsage and fields 185/186 alike.
    bogus_power_mw: int | None = None


@dataclass
class Personality:
    key: str
    description: str
    driver: DriverSpec
    gpus: list[GpuSpec]
    quirks: Quirks = field(default_factory=Quirks)

    def copy(self) -> Personality:
        return copy.deepcopy(self)

    @classmethod
    def from_recording(cls, doctor_json: dict[str, Any], samples: list[dict[str, Any]],
                       key: str = "recorded", load: list[dict[str, Any]] | None = None) -> Personality:
        """A personality from ``rigscope doctor --json`` and ``rigscope sample --json`` lines of one machine.

        Values come from the doctor report and the first sample that read each GPU; a metric doctor
        lists as unsupported, or a null in the sample, becomes NotSupported. The driver branch is
        taken from the driver version (R470-, R535-style or newer). ``load`` (the device check's
        ``samples-load.jsonl``) replays the run under load: its reason masks become the GPU's
        clock-event timeline from the driver's start, one line a recorded second apart, and the
        supported counters count the time their bit is set in it, at the branch's field ids.
        """
        version = str(doctor_json.get("driver_version") or "550.0")
        head = version.split(".", 1)[0]
        major = int(head) if head.isdigit() else 550
        cuda_text = str(doctor_json.get("cuda_version") or "12.4")
        cuda_major, _, cuda_minor = cuda_text.partition(".")
        cuda = int(cuda_major) * 1000 + int(cuda_minor or 0) * 10
        driver = r470(version, cuda) if major < 510 else r535(version, cuda) if major < 550 else r550(version, cuda)
        by_index: dict[int, dict[str, Any]] = {}
        processes: dict[int, list[ProcessSpec]] = {}
        for tick in samples:
            for gpu in tick.get("gpus", []):
                if gpu.get("state") == "ok":
                    by_index.setdefault(int(gpu["index"]), gpu)
            if not processes:
                for proc in tick.get("processes", []):
                    processes.setdefault(int(proc["gpu_index"]), []).append(ProcessSpec(
                        pid=int(proc["pid"]), used_mib=proc.get("vram_mib"), kind=str(proc.get("kind", "compute")),
                        name=str(proc.get("name") or "python")))
        times = [float(t["time_s"]) for t in samples[:2] if "time_s" in t]
        interval_s = times[1] - times[0] if len(times) == 2 and times[1] > times[0] else 1.0
        gpus = []
        for report in doctor_json.get("gpus", []):
            index = int(report["index"])
            gpus.append(_gpu_from_recording(report, by_index.get(index, {}), processes.get(index, []), interval_s,
                                            _counter_metrics(version)))
        if load:
            for gpu in gpus:
                _replay_load(gpu, load, gpus.index(gpu))
        return cls(key, f"recorded: {doctor_json.get('source', {}).get('detail', '?')}", driver, gpus)


def _counter_metrics(driver_version: str) -> dict[str, int]:
    """Rigscope's per-cause time metrics and the field the recorded driver's branch counts each at."""
    sw_thermal, hw_thermal, hw_brake = id_sets_for(driver_version)[0]
    return {"clock_event_sw_power_cap_s": abi.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
            "clock_event_sw_thermal_s": sw_thermal, "clock_event_hw_thermal_s": hw_thermal,
            "clock_event_hw_power_brake_s": hw_brake}


def _gpu_from_recording(report: dict[str, Any], sample: dict[str, Any], procs: list[ProcessSpec],
                        interval_s: float, counter_metrics: dict[str, int]) -> GpuSpec:
    supported: dict[str, bool] = report.get("metrics", {})

    def metric(name: str) -> Any:
        return sample.get(name) if supported.get(name, True) else None

    def whole(value: Any) -> int | None:
        return round(value) if isinstance(value, (int, float)) else None

    total = float(report.get("vram_total_mib") or 0.0)
    free = metric("vram_free_mib")
    used = metric("vram_used_mib") or 0.0
    limits = report.get("power_limit_range_w") or [None, None]
    name = str(report.get("name") or "GPU")
    fields = {83, 185, 186} if supported.get("power_w") else set()
    if supported.get("pcie_tx_kib_s"):
        fields |= {197, 198}
    counters = {fid: float(sample.get(name) or 0.0) / interval_s * 1e9
                for name, fid in counter_metrics.items() if supported.get(name)}
    fields |= set(counters)
    temperature_c = whole(metric("temperature_c")) or 0
    thresholds = {k: whole(report.get(f"temp_{k}_c")) for k in ("slowdown", "shutdown", "max_operating")}
    tlimit: dict[str, Any] = {}
    if report.get("temp_thresholds_relative") and any(v is not None for v in thresholds.values()):
        # Served back as T.Limit offsets: the limit is the max operating temperature (offset 0) when known.
        limit = next(v for v in (thresholds["max_operating"], thresholds["slowdown"], thresholds["shutdown"])
                     if v is not None)
        tlimit = {"tlimit_margin_c": limit - temperature_c, **{
            f"tlimit_{k if k != 'max_operating' else 'gpu_max'}_c": limit - v
            for k, v in thresholds.items() if v is not None}}
        fields |= {193, 194, 196}
        thresholds = dict.fromkeys(thresholds)
    return GpuSpec(
        source="recorded by rigscope doctor --json / sample --json",
        name=name, uuid=str(report.get("uuid") or ""), bus_id=str(report.get("pci_bus_id") or "00000000:01:00.0"),
        vbios=str(report.get("vbios_version") or "N/A"), architecture=abi.NVML_DEVICE_ARCH_UNKNOWN,
        persistence=bool(report.get("persistence_mode")),
        memory_total_mib=total,
        memory_reserved_mib=max(0.0, total - float(used) - float(free)) if free is not None else None,
        memory_used_mib=float(used),
        utilization_gpu_pct=whole(metric("utilization_gpu_pct")),
        utilization_mem_pct=whole(metric("utilization_mem_pct")),
        temperature_c=temperature_c,
        temp_slowdown_c=thresholds["slowdown"], temp_shutdown_c=thresholds["shutdown"],
        temp_max_operating_c=thresholds["max_operating"],
        power_draw_w=metric("power_w"), power_limit_w=report.get("power_limit_w"),
        power_limit_default_w=report.get("power_limit_default_w"),
        power_limit_min_w=limits[0], power_limit_max_w=limits[1],
        power_limit_settable=bool(report.get("power_limit_settable")),
        sm_clock_mhz=whole(metric("sm_clock_mhz")), mem_clock_mhz=whole(metric("mem_clock_mhz")),
        sm_clock_max_mhz=whole(report.get("sm_clock_max_mhz")),
        fan_pct=whole(metric("fan_pct")), pstate=whole(metric("pstate")),
        clock_event_reasons=whole(metric("clock_event_reasons")),
        pcie_gen=whole(metric("pcie_gen")), pcie_width=whole(metric("pcie_width")),
        pcie_tx_kb_s=whole(metric("pcie_tx_kib_s")), pcie_rx_kb_s=whole(metric("pcie_rx_kib_s")),
        energy_start_mj=whole(metric("energy_mj")),
        fields=frozenset(fields),
        clock_event_ns_per_s=counters,
        processes=procs,
        **tlimit,
    )


_CAUSE_BITS = {"clock_event_sw_power_cap_s": 0x4, "clock_event_sw_thermal_s": 0x20,
               "clock_event_hw_thermal_s": 0x40, "clock_event_hw_power_brake_s": 0x80}


def _replay_load(gpu: GpuSpec, load: list[dict[str, Any]], position: int) -> None:
    """The recorded reason masks under load as ``gpu``'s timeline; its counters integrate them."""
    steps: list[tuple[float, int]] = []
    start: float | None = None
    for line in load:
        entries = [g for g in line.get("gpus", []) if g.get("state") == "ok"]
        if position >= len(entries) or entries[position].get("clock_event_reasons") is None:
            continue
        t = float(line.get("time_s", 0.0))
        start = t if start is None else start
        steps.append((t - start, int(entries[position]["clock_event_reasons"])))
    gpm = [entries[position]["gpm"] for line in load
           if position < len(entries := [g for g in line.get("gpus", []) if g.get("state") == "ok"])
           and entries[position].get("gpm")]
    if gpm:  # GPM under load: the stand-in's activity is the recorded mean (it models a constant level)
        gpu.gpm = True
        for metric, key in ((abi.NVML_GPM_METRIC_SM_UTIL, "sm_active_pct"),
                            (abi.NVML_GPM_METRIC_ANY_TENSOR_UTIL, "tensor_active_pct"),
                            (abi.NVML_GPM_METRIC_DRAM_BW_UTIL, "dram_active_pct")):
            values = [float(g[key]) for g in gpm if g.get(key) is not None]
            if values:
                gpu.gpm_activity_pct[metric] = sum(values) / len(values)
    if not steps:
        return
    gpu.clock_event_timeline = tuple(steps)
    counters = dict(gpu.clock_event_ns_per_s)
    gpu.clock_event_ns_per_s = {}
    by_fid = {fid: _CAUSE_BITS[name] for name, fid in _counter_metrics_by_fid(counters)}
    gpu.counter_field_bits = by_fid


def _counter_metrics_by_fid(counters: dict[int, float]) -> list[tuple[str, int]]:
    """(cause, field id) for each counter field the recording answered (its branch's ids)."""
    out = []
    for fid in counters:
        if fid == 74:
            out.append(("clock_event_sw_power_cap_s", fid))
        elif fid in (251, 269):
            out.append(("clock_event_sw_thermal_s", fid))
        elif fid in (252, 270):
            out.append(("clock_event_hw_thermal_s", fid))
        elif fid in (253, 271):
            out.append(("clock_event_hw_power_brake_s", fid))
    return out


# --- the personalities ---------------------------------------------------------------------------

#: Fields an R550+ driver answers on Ada/Hopper: energy, power average/instant, T.Limit offsets, PCIe bytes.
_ADA_FIELDS = frozenset({83, 185, 186, 193, 194, 196, 197, 198})


def ada_desktop() -> Personality:
    """RTX 4090 on 550.127.05 (GPU 0 of nvsmi_q_RTX4090.txt)."""
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_RTX4090.txt",
        name="NVIDIA GeForce RTX 4090", uuid="GPU-8ee5f1e0-e705-aac5-6d6e-b97ad59601ef",
        bus_id="00000000:01:00.0", vbios="95.02.3C.00.EB", architecture=abi.NVML_DEVICE_ARCH_ADA,
        persistence=True, memory_total_mib=24564, memory_reserved_mib=354, memory_used_mib=2,
        memory_free_mib=24210,
        utilization_gpu_pct=0, utilization_mem_pct=0, temperature_c=28,
        tlimit_margin_c=56, tlimit_shutdown_c=-7, tlimit_slowdown_c=-2, tlimit_gpu_max_c=0, target_temp_c=84,
        power_draw_w=20.0, power_limit_w=450.0, power_limit_default_w=450.0,
        power_limit_min_w=150.0, power_limit_max_w=450.0,
        sm_clock_mhz=210, mem_clock_mhz=405, sm_clock_max_mhz=3105, mem_clock_max_mhz=10501,
        fan_pct=0, pstate=8, clock_event_reasons=0x1,
        pcie_gen=1, pcie_gen_max=4, pcie_width=16, pcie_width_max=16, pcie_tx_kb_s=0, pcie_rx_kb_s=50,
        fields=_ADA_FIELDS)
    return Personality("ada_desktop", "Ada desktop: RTX 4090, driver 550", r550(), [gpu])


def ada_laptop() -> Personality:
    """RTX 4070 Laptop under WSL, Windows driver 566.36 (nvsmi_q_RTX4070Laptop_WSL_566.36.txt)."""
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_RTX4070Laptop_WSL_566.36.txt",
        name="NVIDIA GeForce RTX 4070 Laptop GPU", uuid="GPU-1b724e78-eef5-4163-d43c-e4da15d41176",
        bus_id="00000000:01:00.0", vbios="95.06.32.00.38", architecture=abi.NVML_DEVICE_ARCH_ADA,
        persistence=True, memory_total_mib=8188, memory_reserved_mib=240, memory_used_mib=0,
        memory_free_mib=7948,
        utilization_gpu_pct=0, utilization_mem_pct=0, temperature_c=42,
        tlimit_margin_c=33, tlimit_shutdown_c=-12, tlimit_slowdown_c=-2, tlimit_gpu_max_c=0, target_temp_c=75,
        # The dynamic limit (Dynamic Boost) sits above the 55 W default.
        power_draw_w=1.97, power_limit_w=61.24, power_limit_default_w=55.0,
        power_limit_min_w=5.0, power_limit_max_w=140.0, power_limit_settable=False,
        sm_clock_mhz=210, mem_clock_mhz=405, sm_clock_max_mhz=3105, mem_clock_max_mhz=8001,
        fan_pct=None, pstate=8, clock_event_reasons=0x1,
        pcie_gen=4, pcie_gen_max=4, pcie_width=8, pcie_width_max=8, pcie_tx_kb_s=350, pcie_rx_kb_s=500,
        fields=_ADA_FIELDS, process_utilization=False)  # WDDM (WSL): no per-process utilization
    return Personality("ada_laptop", "Ada laptop: RTX 4070 Laptop, WSL, driver 566.36",
                       r550("566.36", 12070), [gpu])


def hopper_mig() -> Personality:
    """H200 on 550.90.12 (nvsmi_q_H200.txt), with MIG enabled (modelled: the capture has MIG off).

    The two MIG devices use H200 profiles 3g.71gb and 4g.71gb; their UUIDs and sizes are modelled.
    """
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_H200.txt (MIG instances modelled)",
        name="NVIDIA H200", uuid="GPU-cb3dfa52-e2f3-9ca4-a399-7d16041c3732",
        bus_id="00000000:03:00.0", vbios="96.00.A5.00.03", architecture=abi.NVML_DEVICE_ARCH_HOPPER,
        persistence=True, memory_total_mib=143771, memory_reserved_mib=700, memory_used_mib=1,
        # Under MIG the parent's utilization is NotSupported (the capture, MIG off, reads 0 %).
        memory_free_mib=143072,
        utilization_gpu_pct=None, utilization_mem_pct=None, temperature_c=28,
        tlimit_margin_c=59, tlimit_shutdown_c=-8, tlimit_slowdown_c=-2, tlimit_gpu_max_c=0, tlimit_mem_max_c=0,
        power_draw_w=74.58, power_limit_w=700.0, power_limit_default_w=700.0,
        power_limit_min_w=200.0, power_limit_max_w=700.0,
        sm_clock_mhz=345, mem_clock_mhz=3199, sm_clock_max_mhz=1980, mem_clock_max_mhz=3201, customer_boost_mhz=1980,
        fan_pct=None, pstate=0, clock_event_reasons=0x1,
        pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16, pcie_tx_kb_s=0, pcie_rx_kb_s=0,
        fields=_ADA_FIELDS | {195},
        mig_mode=(1, 1), process_utilization=False,  # a MIG parent has no per-process utilization
        gpm=True,  # Hopper has GPM; under MIG the parent's nvmlGpmSampleGet answers NotSupported (modelled)
        mig_devices=[
            MigSpec("3g.71gb", "MIG-5c0a3b1e-2f7d-5d8e-9a41-0b6f3e2c7d11", 71_424, 13, gpu_instance_id=2),
            MigSpec("4g.71gb", "MIG-9e4d2a6c-1b3f-5a7e-8c20-4f1d6b9e0a22", 71_424, 13, gpu_instance_id=1),
        ])
    return Personality("hopper_mig", "Hopper with MIG enabled: H200, driver 550", r550("550.90.12", 12040), [gpu])


def hopper() -> Personality:
    """H200 on 550.90.12 as captured (nvsmi_q_H200.txt, MIG off), with GPM: idle, so its activity reads 0 %."""
    gpu = hopper_mig().gpus[0]
    gpu.source = REALDATA + "nvsmi_q_H200.txt"
    gpu.utilization_gpu_pct, gpu.utilization_mem_pct = 0, 0  # the capture: "Gpu: 0 %", "Memory: 0 %"
    gpu.mig_mode, gpu.mig_devices, gpu.process_utilization = (0, 0), [], True
    gpu.gpm = True
    gpu.gpm_activity_pct = {abi.NVML_GPM_METRIC_SM_UTIL: 0.0, abi.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.0,
                            abi.NVML_GPM_METRIC_DRAM_BW_UTIL: 0.0, abi.NVML_GPM_METRIC_SM_OCCUPANCY: 0.0}
    return Personality("hopper", "Hopper: H200, driver 550, MIG off, GPM", r550("550.90.12", 12040), [gpu])


def r470_gtx680() -> Personality:
    """GTX 680 on 470.256.02 (nvsmi_q_GTX680.txt): nearly everything N/A on Kepler."""
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_GTX680.txt",
        name="NVIDIA GeForce GTX 680", uuid="GPU-550139a6-4f96-fb93-dc5c-741f01045b48",
        bus_id="00000000:08:00.0", vbios="80.04.47.00.11", architecture=abi.NVML_DEVICE_ARCH_KEPLER,
        persistence=False, memory_total_mib=2000, memory_reserved_mib=None, memory_used_mib=0,
        memory_free_mib=2000,
        utilization_gpu_pct=None, utilization_mem_pct=None, temperature_c=35,
        fan_pct=37, pstate=0, energy_start_mj=None, power_limit_settable=False,
        process_utilization=False)  # Kepler: per-process utilization is Maxwell or newer
    return Personality("r470_gtx680", "R470: GTX 680, driver 470.256.02", r470(), [gpu])


def r470_v100() -> Personality:
    """V100 readings (GPU 0 of nvsmi_q_V100_x8.txt, captured on 550) served by an R470 driver (modelled).

    The branch lacks the "event" reason calls, v2 memory info and the v3 process calls, so pynvml's
    own fallbacks (FunctionNotFound, NVMLLibraryMismatchError) run.
    """
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_V100_x8.txt (driver branch modelled as R470)",
        name="Tesla V100-SXM2-16GB", uuid="GPU-f3bbf1a0-ec50-caa0-d5ab-180afe8207e3",
        bus_id="00000000:00:04.0", vbios="88.00.4F.00.09", architecture=abi.NVML_DEVICE_ARCH_VOLTA,
        persistence=True, memory_total_mib=16384, memory_reserved_mib=None, memory_used_mib=241,
        memory_free_mib=16145,
        utilization_gpu_pct=0, utilization_mem_pct=0, temperature_c=37,
        temp_shutdown_c=90, temp_slowdown_c=87, temp_max_operating_c=83,
        power_draw_w=44.5, power_limit_w=300.0, power_limit_default_w=300.0,
        power_limit_min_w=150.0, power_limit_max_w=300.0,
        sm_clock_mhz=135, mem_clock_mhz=877, sm_clock_max_mhz=1530, mem_clock_max_mhz=877, customer_boost_mhz=1530,
        fan_pct=None, pstate=0, clock_event_reasons=0x1,
        pcie_gen=3, pcie_gen_max=3, pcie_width=16, pcie_width_max=16, pcie_tx_kb_s=0, pcie_rx_kb_s=50,
        fields=frozenset({83}))
    return Personality("r470_v100", "R470: V100 readings under driver 470", r470("470.256.02", 11040), [gpu])


def r535_gtx1050ti() -> Personality:
    """GTX 1050 Ti on 535.161.07 (nvsmi_q_GTX1050Ti.txt): the branch whose v3 process entries are 32 bytes."""
    gpu = GpuSpec(
        source=REALDATA + "nvsmi_q_GTX1050Ti.txt",
        name="NVIDIA GeForce GTX 1050 Ti", uuid="GPU-58cc1259-69d2-90d0-2a7c-35ecabe4c4ff",
        bus_id="00000000:08:00.0", vbios="86.07.22.00.B8", architecture=abi.NVML_DEVICE_ARCH_PASCAL,
        persistence=False, memory_total_mib=4096, memory_reserved_mib=57, memory_used_mib=0,
        memory_free_mib=4038,
        utilization_gpu_pct=0, utilization_mem_pct=0, temperature_c=31,
        temp_shutdown_c=102, temp_slowdown_c=99, target_temp_c=83,
        power_draw_w=None, power_limit_w=75.0, power_limit_default_w=75.0,
        power_limit_min_w=52.5, power_limit_max_w=75.0,
        sm_clock_mhz=1290, mem_clock_mhz=3504, sm_clock_max_mhz=1911, mem_clock_max_mhz=3504,
        fan_pct=40, pstate=0, clock_event_reasons=0x0,
        pcie_gen=3, pcie_gen_max=3, pcie_width=16, pcie_width_max=16, pcie_tx_kb_s=0, pcie_rx_kb_s=0,
        energy_start_mj=None, fields=frozenset({197, 198}))
    return Personality("r535_gtx1050ti", "R535: GTX 1050 Ti, driver 535.161.07", r535(), [gpu])


# --- quirks, each applied to a copy --------------------------------------------------------------


def with_pcie_wrap(base: Personality, bits: int = 32, before_wrap_bytes: int = 100 * 1024) -> Personality:
    """PCIe byte counters ``bits`` wide, starting ``before_wrap_bytes`` short of their wrap."""
    out = base.copy()
    out.key += "+pcie_wrap"
    out.quirks = replace(out.quirks, pcie_counter_bits=bits, pcie_counter_start=2**bits - before_wrap_bytes)
    return out


def with_failing_sensor(base: Personality, symbol: str = "nvmlDeviceGetFanSpeed",
                        code: int = abi.NVML_ERROR_UNKNOWN) -> Personality:
    """One sensor answers ``code`` on every call (nvidia-smi prints "ERR!" for it)."""
    out = base.copy()
    out.key += "+failing_sensor"
    out.quirks = replace(out.quirks, failing_symbols={**out.quirks.failing_symbols, symbol: code})
    return out


def with_name_bytes(base: Personality, name: bytes = b"NVIDIA GeForce RTX 4090 \xff\xfe") -> Personality:
    """The driver writes a device name that is not valid UTF-8."""
    out = base.copy()
    out.key += "+bad_utf8_name"
    out.gpus[0].name = name
    return out


def with_bogus_power(base: Personality, power_mw: int = 593_000) -> Personality:
    """A power reading on a bogus scale: ~593,000 mW at idle, seen on an RTX 4090 Laptop (g-helper PR #5819)."""
    out = base.copy()
    out.key += "+bogus_power"
    out.quirks = replace(out.quirks, bogus_power_mw=power_mw)
    return out


PERSONALITIES: dict[str, Callable[[], Personality]] = {
    "ada_desktop": ada_desktop,
    "ada_laptop": ada_laptop,
    "hopper": hopper,
    "hopper_mig": hopper_mig,
    "r470_gtx680": r470_gtx680,
    "r470_v100": r470_v100,
    "r535_gtx1050ti": r535_gtx1050ti,
    "ada_desktop+pcie_wrap": lambda: with_pcie_wrap(ada_desktop()),
    "ada_laptop+failing_fan": lambda: with_failing_sensor(ada_laptop()),
    "ada_desktop+bad_utf8_name": lambda: with_name_bytes(ada_desktop()),
    "ada_laptop+bogus_power": lambda: with_bogus_power(ada_laptop()),
}

# The counter-id personalities (R575, R580.65, R580.82+) live beside this module; imported last
# because they build on hopper() above.
from tests.fakes.personalities_counters import COUNTER_PERSONALITIES  # noqa: E402

PERSONALITIES.update(COUNTER_PERSONALITIES)
