"""The Prometheus exporter: dcgm names and labels, omitted metrics, lost GPUs, clock-event seconds, binding."""

from __future__ import annotations

import argparse
import socket
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.frame import StressResult
from desktop import exporter
from desktop.cli import build_parser, serve
from desktop.errors import UserError
from desktop.exporter import SnapshotCollector, parse_listen, start_exporter
from desktop.history.store import HistoryStore
from desktop.telemetry.model import ClockEventReason, DeviceState, GpuReading, GpuSample, Snapshot, SourceInfo
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend

SOURCE = SourceInfo(kind="simulated", detail="test")


def scrape(collector: SnapshotCollector) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Metric name -> [(labels, value)] as a Prometheus server would parse the page."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def two_gpus() -> tuple[SimulatedBackend, Sampler]:
    backend = open_gpu_backend("rtx4090-laptop,h100")
    assert isinstance(backend, SimulatedBackend)
    clock = iter(float(i) for i in range(1_000_000))
    now = [0.0]

    def tick_clock() -> float:
        now[0] = next(clock)
        return 1_700_000_000.0 + now[0]

    return backend, Sampler(backend, None, clock=tick_clock, monotonic=lambda: now[0])


def test_dcgm_names_labels_and_values_per_gpu() -> None:
    backend, sampler = two_gpus()
    collector = SnapshotCollector("rig-01")
    snapshot = sampler.tick()
    collector.update(snapshot)
    page = scrape(collector)
    for dcgm in exporter.DCGM_FIELDS:
        rows = page[dcgm.name]
        assert [labels["gpu"] for labels, _ in rows] == ["0", "1"]
    labels, temp = page["DCGM_FI_DEV_GPU_TEMP"][0]
    info = snapshot.gpus[0].info
    assert labels == {"gpu": "0", "UUID": info.uuid, "pci_bus_id": "00000000:01:00.0", "device": "nvidia0",
                      "modelName": info.name, "Hostname": "rig-01"}
    assert temp == snapshot.gpus[0].sample.temperature_c  # type: ignore[union-attr]
    assert page["rigscope_power_limit_watts"][0][1] == info.power_limit_enforced_w
    assert page["rigscope_sm_clock_max_mhz"][1][1] == snapshot.gpus[1].info.sm_clock_max_mhz
    assert {lab["state"]: v for lab, v in page["rigscope_gpus"]} == {"ok": 2.0, "lost": 0.0, "asleep": 0.0,
                                                                      "unavailable": 0.0}
    assert page["rigscope_info"][0][0]["source"] == "simulated"
    backend.close()


def test_unsupported_metric_is_omitted_not_zero() -> None:
    backend, sampler = two_gpus()
    snapshot = sampler.tick()
    samples = [r.sample for r in snapshot.gpus]
    assert samples[0] is not None and samples[1] is not None
    no_power = replace(snapshot.gpus[0], sample=replace(samples[0], power_w=None, fan_pct=None))
    collector = SnapshotCollector("h")
    collector.update(replace(snapshot, gpus=(no_power, snapshot.gpus[1])))
    page = scrape(collector)
    assert [lab["gpu"] for lab, _ in page["DCGM_FI_DEV_POWER_USAGE"]] == ["1"]
    # A metric no GPU supports is not announced at all (no HELP/TYPE without samples).
    none_supported = tuple(replace(r, sample=replace(s, pcie_tx_kib_s=None))
                           for r, s in zip(snapshot.gpus, samples, strict=True) if s is not None)
    collector.update(replace(snapshot, gpus=none_supported))
    assert "DCGM_FI_DEV_PCIE_TX_THROUGHPUT" not in scrape(collector)
    backend.close()


def test_lost_gpu_series_disappear_and_the_others_stay() -> None:
    backend, sampler = two_gpus()
    collector = SnapshotCollector("h")
    collector.update(sampler.tick())
    backend.model.set_lost(1, True)
    collector.update(sampler.tick())
    page = scrape(collector)
    for name, rows in page.items():
        gpus = {lab.get("gpu") for lab, _ in rows if "gpu" in lab}
        assert "1" not in gpus, name
    assert [lab["gpu"] for lab, _ in page["DCGM_FI_DEV_GPU_TEMP"]] == ["0"]
    assert {lab["state"]: v for lab, v in page["rigscope_gpus"]} == {"ok": 1.0, "lost": 1.0, "asleep": 0.0,
                                                                      "unavailable": 0.0}
    backend.model.set_lost(1, False)
    collector.update(sampler.tick())
    assert [lab["gpu"] for lab, _ in scrape(collector)["DCGM_FI_DEV_GPU_TEMP"]] == ["0", "1"]
    backend.close()


def _snapshot(mono_s: float, mask: int | None, state: DeviceState = DeviceState.OK) -> Snapshot:
    backend = open_gpu_backend("rtx4090-laptop")
    info = backend.devices()[0]
    sample = GpuSample(temperature_c=80.0, clock_event_reasons=mask) if state is DeviceState.OK else None
    return Snapshot(time_s=1e9 + mono_s, monotonic_s=mono_s, source=SOURCE,
                    gpus=(GpuReading(info, state, sample),))


def _reason_seconds(collector: SnapshotCollector) -> dict[str, float]:
    rows = scrape(collector)["rigscope_clock_event_seconds_total"]
    return {lab["reason"]: v for lab, v in rows}


def test_clock_event_seconds_accumulate_interval_times_reason_bits() -> None:
    thermal = int(ClockEventReason.HW_THERMAL_SLOWDOWN)
    power = int(ClockEventReason.SW_POWER_CAP)
    collector = SnapshotCollector("h")
    for mono, mask in [(0.0, thermal), (1.0, thermal), (2.0, thermal | power), (4.0, 0), (5.0, power)]:
        collector.update(_snapshot(mono, mask))
    seconds = _reason_seconds(collector)
    # The first sample has no interval; afterwards each interval counts for the bits it ends with.
    assert seconds["hw_thermal_slowdown"] == 2.0
    assert seconds["sw_power_cap"] == 2.0
    assert seconds["gpu_idle"] == 0.0
    active = {lab["reason"]: v for lab, v in scrape(collector)["rigscope_clock_event_active"]}
    assert active["sw_power_cap"] == 1.0 and active["hw_thermal_slowdown"] == 0.0


def test_clock_event_seconds_skip_long_gaps_and_lost_time() -> None:
    thermal = int(ClockEventReason.HW_THERMAL_SLOWDOWN)
    collector = SnapshotCollector("h")
    collector.update(_snapshot(0.0, thermal))
    collector.update(_snapshot(exporter.MAX_SAMPLE_GAP_S + 100.0, thermal))  # a suspended laptop
    collector.update(_snapshot(exporter.MAX_SAMPLE_GAP_S + 101.0, thermal))
    assert _reason_seconds(collector)["hw_thermal_slowdown"] == 1.0
    collector.update(_snapshot(200.0, None, DeviceState.LOST))
    assert "rigscope_clock_event_seconds_total" not in scrape(collector)
    collector.update(_snapshot(230.0, thermal))  # back: the counter resumes, lost time not counted
    assert _reason_seconds(collector)["hw_thermal_slowdown"] == 1.0


def test_reasons_unsupported_means_no_reason_series() -> None:
    collector = SnapshotCollector("h")
    collector.update(_snapshot(0.0, None))
    collector.update(_snapshot(1.0, None))
    page = scrape(collector)
    assert "rigscope_clock_event_seconds_total" not in page
    assert "rigscope_clock_event_active" not in page


def _counted(mono_s: float, **seconds: float | None) -> Snapshot:
    snap = _snapshot(mono_s, 0x4)
    reading = snap.gpus[0]
    assert reading.sample is not None
    return replace(snap, gpus=(replace(reading, sample=replace(reading.sample, **seconds)),))


def _violations(collector: SnapshotCollector) -> dict[str, float]:
    page = scrape(collector)
    return {name: page[name][0][1] for name in ("DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION")
            if name in page}


def test_violation_counters_are_running_totals_of_the_counted_time_in_nanoseconds() -> None:
    """In ns with dcgm-exporter's HELP text since late 2025 (Rigscope exported µs: off by 1000x beside it)."""
    collector = SnapshotCollector("h")
    collector.update(_counted(0.0))  # a first sample counts nothing yet
    assert _violations(collector) == {}
    collector.update(_counted(1.0, clock_event_sw_power_cap_s=1.0, clock_event_hw_power_brake_s=0.0,
                              clock_event_sw_thermal_s=0.3, clock_event_hw_thermal_s=0.0))
    collector.update(_counted(2.0, clock_event_sw_power_cap_s=0.5, clock_event_hw_power_brake_s=0.25,
                              clock_event_sw_thermal_s=0.0, clock_event_hw_thermal_s=0.125))
    # Counted time is exact across a long gap (a suspended laptop): nothing is skipped.
    collector.update(_counted(exporter.MAX_SAMPLE_GAP_S + 100.0, clock_event_sw_power_cap_s=2.0))
    assert _violations(collector) == {"DCGM_FI_DEV_POWER_VIOLATION": pytest.approx(3_750_000_000.0),
                                      "DCGM_FI_DEV_THERMAL_VIOLATION": pytest.approx(425_000_000.0)}
    page = generate_latest(_registry(collector)).decode()
    assert "# TYPE DCGM_FI_DEV_POWER_VIOLATION untyped" in page  # dcgm's exact name, no _total
    assert "# HELP DCGM_FI_DEV_THERMAL_VIOLATION Throttling duration due to thermal constraints (in ns).\n" in page
    assert "# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in ns).\n" in page


def _registry(collector: SnapshotCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def test_violation_counters_are_omitted_where_the_driver_keeps_none() -> None:
    collector = SnapshotCollector("h")
    for mono in range(3):  # counters unsupported: every sample None
        collector.update(_snapshot(float(mono), 0x4))
    assert _violations(collector) == {}
    # Only SW thermal counted (an older driver's perf-policy field): power stays absent, not 0.
    collector.update(_counted(3.0, clock_event_sw_thermal_s=0.5))
    assert _violations(collector) == {"DCGM_FI_DEV_THERMAL_VIOLATION": pytest.approx(500_000_000.0)}


def test_simulated_gpus_export_violation_counters() -> None:
    backend, sampler = two_gpus()
    collector = SnapshotCollector("h")
    for _ in range(3):
        collector.update(sampler.tick())
    page = scrape(collector)
    for name in ("DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION"):
        assert [lab["gpu"] for lab, _ in page[name]] == ["0", "1"], name
        assert all(value >= 0.0 for _, value in page[name])
    backend.close()


def test_last_stress_and_recorder_health() -> None:
    collector = SnapshotCollector("h")
    assert not any(name.startswith(("rigscope_stress", "rigscope_recorder")) for name in scrape(collector))
    result = StressResult(run_id=3, started_s=100.0, ended_s=700.0, gpu_uuid="GPU-X", gpu_name="RTX",
                          workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=80.0,
                          sustained_throughput=60.0, throttled=True, errors=0, driver_version=None, summary="s")
    collector.set_last_stress(result)
    collector.set_recorder_health(exporter.RecorderHealth(up=True, last_write_s=5.0, rows_written=42, write_errors=1))
    page = scrape(collector)
    labels, value = page["rigscope_stress_last_throughput"][0]
    assert value == 60.0 and labels["unit"] == "TFLOP/s" and labels["UUID"] == "GPU-X"
    assert page["rigscope_stress_last_throttled"][0][1] == 1.0
    assert page["rigscope_stress_last_sustained_ratio"][0][1] == pytest.approx(0.75)
    assert page["rigscope_recorder_up"][0][1] == 1.0
    assert page["rigscope_recorder_rows_written_total"][0][1] == 42.0
    assert page["rigscope_recorder_write_errors_total"][0][1] == 1.0


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9835", ("127.0.0.1", 9835)),
    ("9835", ("127.0.0.1", 9835)),
    ("0.0.0.0:0", ("0.0.0.0", 0)),
    ("[::1]:9400", ("::1", 9400)),
])
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", [":9835", "localhost", "host:port", "1.2.3.4:70000"])
def test_parse_listen_rejects_with_a_clear_message(text: str) -> None:
    with pytest.raises(UserError, match="--listen"):
        parse_listen(text)


def test_binds_loopback_unless_told() -> None:
    assert parse_listen(exporter.DEFAULT_LISTEN)[0] == "127.0.0.1"
    for argv in (["export", "--prometheus"], ["record", "--prometheus"], ["serve"]):
        args = build_parser().parse_args(argv)
        assert parse_listen(args.listen)[0] == "127.0.0.1"
    with start_exporter("0") as handle:
        assert handle._server.server_address[0] == "127.0.0.1"  # type: ignore[attr-defined]
        assert handle.port > 0
    with start_exporter("0.0.0.0:0") as handle:
        assert handle._server.server_address[0] == "0.0.0.0"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("addr", "loopback"), [
    ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("workstation", False),
])
def test_is_loopback(addr: str, loopback: bool) -> None:
    assert exporter.is_loopback(addr) is loopback


def test_port_in_use_is_a_clear_user_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match=rf"127\.0\.0\.1:{port}: the port is already in use.*--listen"):
            start_exporter(f"127.0.0.1:{port}")


def test_serve_serves_the_simulated_gpu_until_stopped(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    handles: list[exporter.ExporterHandle] = []
    started = threading.Event()
    real_start = exporter.start_exporter

    def spy(listen: str, hostname: str | None = None) -> exporter.ExporterHandle:
        handles.append(real_start(listen, hostname))
        started.set()
        return handles[0]

    monkeypatch.setattr(exporter, "start_exporter", spy)
    stop = threading.Event()
    args = argparse.Namespace(listen="127.0.0.1:0", interval=0.1, simulate="", db=None)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(serve.main(args, stop)))
    thread.start()
    try:
        assert started.wait(10.0)
        page = ""
        for _ in range(100):  # the first tick lands within one interval of the start
            page = urllib.request.urlopen(handles[0].url, timeout=5).read().decode()
            if "DCGM_FI_DEV_GPU_TEMP{" in page:
                break
            stop.wait(0.05)
        assert "DCGM_FI_DEV_GPU_TEMP{" in page
    finally:
        stop.set()
        thread.join(10.0)
    assert result == [0]
    out, err = capsys.readouterr()  # status on stderr, as `record` has it: stdout stays for results
    assert out == "" and err.startswith(f"Serving Prometheus metrics on {handles[0].url}")


def test_last_stress_is_read_from_the_history_at_start(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    assert exporter.load_last_stress(db) is None  # no database yet: nothing, no error
    older = StressResult(run_id=0, started_s=100.0, ended_s=200.0, gpu_uuid="GPU-X", gpu_name="RTX",
                         workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=80.0,
                         sustained_throughput=60.0, throttled=True, errors=0, driver_version=None, summary="old")
    with HistoryStore.open(db) as store:
        store.add_stress_run(older)
        store.add_stress_run(replace(older, started_s=300.0, ended_s=400.0, summary="new", throttled=False))
    newest = exporter.load_last_stress(db)
    assert newest is not None and newest.summary == "new" and not newest.throttled


def test_serve_without_a_driver_serves_no_gpu_and_says_it_is_unavailable(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: Prometheus is a history too: with no usable driver it got a simulated GPU's series as this
    machine's. Now no GPU series, rigscope_gpus{state="unavailable"} 1, and the reason on stderr."""
    from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu

    FakeNvml([desktop_gpu()], init_error=18).install(monkeypatch)  # LIB_RM_VERSION_MISMATCH
    handles: list[exporter.ExporterHandle] = []
    started = threading.Event()
    real_start = exporter.start_exporter

    def spy(listen: str, hostname: str | None = None) -> exporter.ExporterHandle:
        handles.append(real_start(listen, hostname))
        started.set()
        return handles[0]

    monkeypatch.setattr(exporter, "start_exporter", spy)
    stop = threading.Event()
    args = argparse.Namespace(listen="127.0.0.1:0", interval=0.1, simulate=None, db=None)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(serve.main(args, stop)))
    thread.start()
    try:
        assert started.wait(10.0)
        page = ""
        for _ in range(200):  # the first tick lands within one interval of the start
            page = urllib.request.urlopen(handles[0].url, timeout=5).read().decode()
            if "rigscope_gpus{" in page:
                break
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(10.0)
    assert result == [0]
    assert 'state="unavailable"} 1.0' in page and "DCGM_FI_DEV_GPU_TEMP{" not in page
    err = capsys.readouterr().err
    assert "no GPU" in err and "version mismatch" in err



@pytest.mark.parametrize(("interval", "simulate", "message"), [
    (0.0, "", "--interval"),
    (1.0, "no-such-gpu", "no-such-gpu"),
])
def test_serve_user_mistakes(interval: float, simulate: str, message: str) -> None:
    args = argparse.Namespace(listen="127.0.0.1:0", interval=interval, simulate=simulate, db=None)
    with pytest.raises(UserError, match=message):
        serve.main(args, threading.Event())


def test_handle_follows_new_stress_runs(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    first = StressResult(run_id=0, started_s=100.0, ended_s=200.0, gpu_uuid="GPU-X", gpu_name="RTX",
                         workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=80.0,
                         sustained_throughput=60.0, throttled=True, errors=0, driver_version=None, summary="1")
    with HistoryStore.open(db) as store:
        store.add_stress_run(first)
    backend, sampler = two_gpus()
    with start_exporter("127.0.0.1:0") as handle:
        handle.follow_stress_runs(db, period_s=30.0)
        handle.update(sampler.tick())  # t = 0: read
        assert scrape(handle.collector)["rigscope_stress_last_throughput"][0][1] == 60.0
        with HistoryStore.open(db) as store:
            store.add_stress_run(replace(first, started_s=300.0, ended_s=400.0, sustained_throughput=70.0))
        handle.update(sampler.tick())  # t = 1: not due yet
        assert scrape(handle.collector)["rigscope_stress_last_throughput"][0][1] == 60.0
        for _ in range(30):
            handle.update(sampler.tick())
        assert scrape(handle.collector)["rigscope_stress_last_throughput"][0][1] == 70.0
        db.unlink()
        db.mkdir()  # unreadable now: the last verdict stays rather than vanishing
        for _ in range(31):
            handle.update(sampler.tick())
        assert scrape(handle.collector)["rigscope_stress_last_throughput"][0][1] == 70.0
    backend.close()
