"""The collector behind the exporter: dcgm-exporter-named and ``rigscope_*`` metrics from the latest Snapshot.

Names, HELP texts and labels follow dcgm-exporter (see ``desktop.exporter``'s docstring) and come from
``desktop.telemetry.metric_names``, which the fleet reader reads them back by;
everything is built per scrape from state captured under one lock, so the recorder thread
can feed snapshots while Prometheus scrapes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from advisor.safetext import printable
from desktop import __version__
from desktop.telemetry import metric_names as names
from desktop.telemetry.metric_names import (
    DCGM_FIELDS,
    EFFECTIVE_LOAD_GAUGE,
    GPU_LABELS,
    INFO_GAUGES,
    NS_PER_S,
    PROCESS_GAUGES,
    PROCESS_LABELS,
    PROF_GAUGES,
    REASONS,
    SAMPLE_GAUGES,
    VIOLATION_COUNTERS,
)
from desktop.telemetry.model import ClockEventReason, DeviceState, GpuInfo, GpuProcess, GpuReading, Snapshot

if TYPE_CHECKING:
    from advisor.frame import StressResult

#: A gap between two samples longer than this (a suspended laptop, a stalled process) is not
#: counted towards clock-event seconds: nobody saw what the GPU did meanwhile.
MAX_SAMPLE_GAP_S = 60.0

#: Series per GPU and gauge at most (the busiest by SM, then VRAM): a pid is a label, keep the count sane.
MAX_PROCESSES_PER_GPU = 16


@dataclass
class _GpuState:
    """What the exporter remembers per GPU between snapshots."""

    reading: GpuReading
    reason_s: dict[ClockEventReason, float] = field(default_factory=dict)
    last_mono_s: float | None = None
    #: Running ns totals per VIOLATION_COUNTERS name, present once the GPU counted any of its causes.
    violation_ns: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RecorderHealth:
    up: bool
    last_write_s: float | None = None
    rows_written: int | None = None
    write_errors: int | None = None


class SnapshotCollector(Collector):
    """A prometheus-client collector over the latest Snapshot (thread-safe: fed and scraped concurrently)."""

    def __init__(self, hostname: str) -> None:
        self.hostname = printable(hostname)
        self._lock = threading.Lock()
        self._gpus: dict[str, _GpuState] = {}
        self._snapshot: Snapshot | None = None
        self._stress: StressResult | None = None
        self._recorder: RecorderHealth | None = None

    # --- feeding -------------------------------------------------------------------

    def update(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot
            present = set()
            for reading in snapshot.gpus:
                uuid = reading.info.uuid
                present.add(uuid)
                state = self._gpus.setdefault(uuid, _GpuState(reading))
                state.reading = reading
                if reading.state is not DeviceState.OK or reading.sample is None:
                    # Nobody sees the GPU while it is lost: do not count that time on its return.
                    state.last_mono_s = None
                    continue
                for name, _, causes in VIOLATION_COUNTERS:
                    counted: list[float] = [s for cause in causes
                                            if (s := getattr(reading.sample, cause)) is not None]
                    if counted:  # counted time is exact across any gap: no interval check needed
                        state.violation_ns[name] = state.violation_ns.get(name, 0.0) + sum(counted) * NS_PER_S
                mask = reading.sample.clock_event_reasons
                if mask is not None:
                    dt = 0.0 if state.last_mono_s is None else snapshot.monotonic_s - state.last_mono_s
                    dt = dt if 0.0 < dt <= MAX_SAMPLE_GAP_S else 0.0
                    for reason, _ in REASONS:
                        held = state.reason_s.get(reason, 0.0)
                        state.reason_s[reason] = held + dt if mask & reason else held
                state.last_mono_s = snapshot.monotonic_s
            for uuid in set(self._gpus) - present:
                del self._gpus[uuid]

    def set_last_stress(self, result: StressResult | None) -> None:
        with self._lock:
            self._stress = result

    def set_recorder_health(self, health: RecorderHealth | None) -> None:
        with self._lock:
            self._recorder = health

    # --- scraping ------------------------------------------------------------------

    def _gpu_labels(self, info: GpuInfo) -> list[str]:
        return [str(info.index), printable(info.uuid), printable(info.pci_bus_id or ""), f"nvidia{info.index}",
                printable(info.name), self.hostname]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshot = self._snapshot
            gpus = [(s.reading, dict(s.reason_s)) for s in self._gpus.values()]
            violations = {s.reading.info.uuid: dict(s.violation_ns) for s in self._gpus.values()}
            stress = self._stress
            recorder = self._recorder
        ok = [(r, reasons) for r, reasons in gpus if r.state is DeviceState.OK and r.sample is not None]
        ok.sort(key=lambda item: item[0].info.index)
        yield from self._collect_gpus(ok)
        yield from self._collect_effective_load([r for r, _ in ok])
        yield from self._collect_violations([r for r, _ in ok], violations)
        if snapshot is not None:
            yield from self._collect_processes(snapshot.processes, {r.info.index: r.info for r, _ in ok})
        yield from self._collect_host(snapshot, gpus, stress, recorder)

    def _collect_processes(self, processes: tuple[GpuProcess, ...], infos: dict[int, GpuInfo]) -> Iterator[Metric]:
        by_gpu: dict[int, list[GpuProcess]] = {}
        for proc in processes:
            if proc.gpu_index in infos:
                by_gpu.setdefault(proc.gpu_index, []).append(proc)
        kept = []
        for index, procs in sorted(by_gpu.items()):
            procs.sort(key=lambda p: (-(p.sm_util_pct or 0.0), -(p.vram_mib or 0.0), p.pid))
            kept += [(infos[index], p) for p in procs[:MAX_PROCESSES_PER_GPU]]
        for name, help_text, attr in PROCESS_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=list(PROCESS_LABELS))
            for info, proc in kept:
                value = getattr(proc, attr)
                if value is not None:
                    # A process names itself (prctl): any byte, shown escaped so the scrape still encodes.
                    family.add_metric([str(info.index), printable(info.uuid), self.hostname,
                                       str(proc.pid), printable(proc.name)], float(value))
            if family.samples:
                yield family

    def _collect_gpus(self, ok: list[tuple[GpuReading, dict[ClockEventReason, float]]]) -> Iterator[Metric]:
        labels = list(GPU_LABELS)
        readings = [reading for reading, _ in ok]
        families = [
            (GaugeMetricFamily if d.kind == "gauge" else UnknownMetricFamily, d.name, d.help, "sample", d.sample_field)
            for d in DCGM_FIELDS
        ]
        families += [(GaugeMetricFamily, name, text, "sample", attr) for name, text, attr in SAMPLE_GAUGES]
        families += [(GaugeMetricFamily, name, text, "info", attr) for name, text, attr in INFO_GAUGES]
        for family_cls, name, help_text, source, attr in families:
            family = family_cls(name, help_text, labels=labels)
            for reading in readings:
                value = getattr(reading.sample if source == "sample" else reading.info, attr)
                if value is not None:  # unsupported metrics are omitted, never reported as 0
                    family.add_metric(self._gpu_labels(reading.info), float(value))
            if family.samples:
                yield family
        seconds = CounterMetricFamily(
            names.CLOCK_EVENT_SECONDS,
            "Seconds the GPU spent with each clock-event (throttle) reason active, from the sample interval.",
            labels=[*labels, "reason"],
        )
        active = GaugeMetricFamily(
            names.CLOCK_EVENT_ACTIVE, "1 while the clock-event (throttle) reason is active, else 0.",
            labels=[*labels, "reason"],
        )
        for reading, reason_s in ok:
            mask = reading.sample.clock_event_reasons if reading.sample is not None else None
            if mask is None:
                continue
            for reason, label in REASONS:
                seconds.add_metric([*self._gpu_labels(reading.info), label], reason_s.get(reason, 0.0))
                active.add_metric([*self._gpu_labels(reading.info), label], 1.0 if mask & reason else 0.0)
        if seconds.samples:
            yield seconds
            yield active

    def _collect_effective_load(self, readings: list[GpuReading]) -> Iterator[Metric]:
        """Effective load with where it comes from, and DCGM's profiling ratios where the GPU measured them."""
        load = GaugeMetricFamily(
            EFFECTIVE_LOAD_GAUGE, "How hard the GPU worked (in %): SM activity where the GPU measures it "
            "(source=measured, NVML GPM), else estimated from power and SM clock (source=estimate).",
            labels=[*GPU_LABELS, "source"])
        for reading in readings:
            value = reading.sample.effective_load_pct if reading.sample is not None else None
            if value is not None:
                source = "measured" if reading.info.gpm_supported else "estimate"
                load.add_metric([*self._gpu_labels(reading.info), source], float(value))
        if load.samples:
            yield load
        for name, help_text, attr in PROF_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=list(GPU_LABELS))
            for reading in readings:
                pct = getattr(reading.activity, attr) if reading.activity is not None else None
                if pct is not None:
                    family.add_metric(self._gpu_labels(reading.info), pct / 100.0)
            if family.samples:
                yield family

    def _collect_violations(self, readings: list[GpuReading],
                            violations: dict[str, dict[str, float]]) -> Iterator[Metric]:
        # Untyped under dcgm-exporter's exact names, like the energy counter (see the package docstring).
        for name, help_text, _ in VIOLATION_COUNTERS:
            family = UnknownMetricFamily(name, help_text, labels=list(GPU_LABELS))
            for reading in readings:
                total = violations.get(reading.info.uuid, {}).get(name)
                if total is not None:  # a GPU without the counters is omitted, never 0
                    family.add_metric(self._gpu_labels(reading.info), total)
            if family.samples:
                yield family

    def _collect_host(self, snapshot: Snapshot | None, gpus: list[tuple[GpuReading, dict[ClockEventReason, float]]],
                      stress: StressResult | None, recorder: RecorderHealth | None) -> Iterator[Metric]:
        host = [self.hostname]
        if snapshot is not None:
            info = GaugeMetricFamily(names.INFO, "Rigscope version and where its GPU numbers come from.",
                                     labels=["Hostname", "version", "source"])
            info.add_metric([*host, __version__, snapshot.source.kind], 1.0)
            yield info
            stamp = GaugeMetricFamily(names.LAST_SAMPLE_TIMESTAMP_S,
                                      "When the latest GPU sample was taken (Unix time).", labels=["Hostname"])
            stamp.add_metric(host, snapshot.time_s)
            yield stamp
            count = GaugeMetricFamily("rigscope_gpus", "GPUs by device state (ok, lost, asleep); unavailable is 1 "
                                      "while NVML cannot be used at all (no driver, a driver/library version "
                                      "mismatch) and no GPU is read, else 0.", labels=["Hostname", "state"])
            for state in DeviceState:
                count.add_metric([*host, state.value], float(sum(1 for r, _ in gpus if r.state is state)))
            count.add_metric([*host, "unavailable"], 1.0 if snapshot.source.unavailable else 0.0)
            yield count
        if stress is not None:
            yield from _stress_metrics(stress, self.hostname)
        if recorder is not None:
            yield from _recorder_metrics(recorder, self.hostname)


def _stress_metrics(result: StressResult, hostname: str) -> Iterator[Metric]:
    labels = ["UUID", "modelName", "Hostname", "workload", "dtype", "unit"]
    values = [printable(v) for v in (result.gpu_uuid, result.gpu_name, hostname, result.workload, result.dtype,
                                      result.unit)]
    rows: list[tuple[str, str, float]] = [
        (names.STRESS_THROUGHPUT, "Sustained throughput of the last stress test (in its unit label).",
         result.sustained_throughput),
        (names.STRESS_PEAK_THROUGHPUT, "Peak throughput of the last stress test (in its unit label).",
         result.peak_throughput),
        (names.STRESS_THROTTLED, "1 when the last stress test's verdict was 'throttled', else 0.",
         1.0 if result.throttled else 0.0),
        (names.STRESS_ERRORS, "Result mismatches found by the last stress test.", float(result.errors)),
        (names.STRESS_END_TIMESTAMP_S, "When the last stress test ended (Unix time).",
         result.ended_s),
    ]
    if result.peak_throughput > 0:
        rows.append((names.STRESS_SUSTAINED_RATIO, "Sustained / peak throughput of the last stress test.",
                     result.sustained_throughput / result.peak_throughput))
    for name, help_text, value in rows:
        gauge = GaugeMetricFamily(name, help_text, labels=labels)
        gauge.add_metric(values, value)
        yield gauge


def _recorder_metrics(health: RecorderHealth, hostname: str) -> Iterator[Metric]:
    up = GaugeMetricFamily(names.RECORDER_UP, "1 while the recorder is writing history, else 0.",
                           labels=["Hostname"])
    up.add_metric([hostname], 1.0 if health.up else 0.0)
    yield up
    if health.last_write_s is not None:
        last = GaugeMetricFamily(names.RECORDER_LAST_WRITE_TIMESTAMP_S,
                                 "When the recorder last committed samples (Unix time).", labels=["Hostname"])
        last.add_metric([hostname], health.last_write_s)
        yield last
    if health.rows_written is not None:
        rows = CounterMetricFamily(names.RECORDER_ROWS_WRITTEN, "Sample rows the recorder has written.",
                                   labels=["Hostname"])
        rows.add_metric([hostname], float(health.rows_written))
        yield rows
    if health.write_errors is not None:
        errors = CounterMetricFamily(names.RECORDER_WRITE_ERRORS, "Failed history writes since start.",
                                     labels=["Hostname"])
        errors.add_metric([hostname], float(health.write_errors))
        yield errors
