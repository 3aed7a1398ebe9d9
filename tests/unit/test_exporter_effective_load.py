"""The exporter serves effective load with its source, and DCGM's profiling ratios only where the GPU measured them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.effective_load import Calibration
from desktop.exporter import SnapshotCollector
from desktop.exporter.collector import EFFECTIVE_LOAD_GAUGE
from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.sampler import Sampler
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, hopper_gpu

Page = dict[str, list[tuple[dict[str, str], float]]]


def scrape(collector: SnapshotCollector) -> Page:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out: Page = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _page_after_two_ticks(fake: FakeNvml) -> Page:
    backend = NvmlBackend.open(fake.module)
    now = [0.0]
    sampler = Sampler(backend, None, clock=lambda: 1.7e9 + now[0], monotonic=lambda: now[0])
    # Each GPU's own stress run: without GPM a GPU is estimated only against one (issue 22).
    sampler.effective_load.calibrate_all({info.uuid: Calibration(20.0, info.power_limit_enforced_w or 300.0,
                                                                 0.9 * (info.sm_clock_max_mhz or 2000.0), "stress run")
                                          for info in backend.devices()})
    collector = SnapshotCollector("rig-01")
    try:
        for _ in range(2):
            now[0] += 1.0
            fake.advance(1.0)
            collector.update(sampler.tick())
    finally:
        sampler.close()
    return scrape(collector)


def test_measured_and_estimated_effective_load_side_by_side() -> None:
    page = _page_after_two_ticks(FakeNvml([hopper_gpu(), FakeGpu()]))
    rows = {labels["gpu"]: (labels, value) for labels, value in page[EFFECTIVE_LOAD_GAUGE]}
    hopper_labels, hopper_value = rows["0"]
    assert hopper_labels["source"] == "measured" and abs(hopper_value - 62.0) < 1e-6
    assert hopper_labels["modelName"] == "NVIDIA H100 80GB HBM3" and hopper_labels["Hostname"] == "rig-01"
    geforce_labels, geforce_value = rows["1"]
    assert geforce_labels["source"] == "estimate" and 0.0 <= geforce_value <= 100.0
    # DCGM's names carry ratios (0..1) and only for the GPU that measured them: the estimate never poses as DCGM's.
    for name, ratio in (("DCGM_FI_PROF_SM_ACTIVE", 0.62), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.41),
                        ("DCGM_FI_PROF_DRAM_ACTIVE", 0.55), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.97)):
        assert [(labels["gpu"], round(value, 6)) for labels, value in page[name]] == [("0", ratio)], name


def test_no_profiling_series_without_gpm() -> None:
    page = _page_after_two_ticks(FakeNvml([FakeGpu()]))
    assert [labels["source"] for labels, _ in page[EFFECTIVE_LOAD_GAUGE]] == ["estimate"]
    assert not [name for name in page if name.startswith("DCGM_FI_PROF_")]


def test_simulated_h100_serves_the_gpm_profiling_ratios() -> None:
    """The simulated H100 answers GPM as a Hopper does (issue 37): DCGM_FI_PROF_* (0-1) for it from its second
    sample on, the same numbers as the reading's activity; the simulated laptop GPU (no GPM) has none."""
    from desktop.telemetry.sampler import open_gpu_backend
    from desktop.telemetry.simulated import SimulatedBackend

    backend = open_gpu_backend("rtx4090-laptop,h100")
    assert isinstance(backend, SimulatedBackend) and backend.manual is not None
    backend.manual.set(1, 1.0, vram_mib=40_000.0)  # a dense GEMM on the H100
    clock = [0.0]

    def monotonic() -> float:
        clock[0] += 1.0
        return clock[0]

    sampler = Sampler(backend, None, clock=lambda: 1.7e9 + clock[0], monotonic=monotonic)
    collector = SnapshotCollector("rig-01")
    try:
        first = sampler.tick()
        assert first.gpus[1].activity is None  # no interval yet, as NVML's first GPM sample
        collector.update(first)
        assert not [name for name in scrape(collector) if name.startswith("DCGM_FI_PROF_")]
        for _ in range(3):
            snapshot = sampler.tick()
            collector.update(snapshot)
    finally:
        sampler.close()
    page = scrape(collector)
    activity = snapshot.gpus[1].activity
    assert activity is not None and snapshot.gpus[0].activity is None
    for name, field in (("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct"), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                                                                      "tensor_active_pct"),
                        ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active_pct"),
                        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "graphics_active_pct")):
        rows = [(labels["gpu"], labels["pci_bus_id"], value) for labels, value in page[name]]
        assert rows == [("1", "00000000:02:00.0", getattr(activity, field) / 100.0)], name
    assert 0.5 < page["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"][0][1] <= 1.0
    loads = {labels["gpu"]: (labels["source"], value) for labels, value in page[EFFECTIVE_LOAD_GAUGE]}
    assert loads["1"] == ("measured", activity.sm_active_pct)
    assert loads["0"][0] == "estimate"
