"""The Grafana dashboard asks only for series the exporter writes, with labels it sets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from advisor.frame import StressResult
from desktop import exporter
from desktop.telemetry.model import ClockEventReason, DeviceState, GpuReading, GpuSample, Snapshot, SourceInfo
from desktop.telemetry.sampler import open_gpu_backend


def dashboard_exprs(repo_root: Path) -> list[str]:
    dashboard: dict[str, Any] = json.loads((repo_root / "packaging/grafana/rigscope.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    return exprs


def exported_series() -> dict[str, set[str]]:
    """Metric name -> label names, with every optional part of the exporter filled."""
    info = open_gpu_backend("rtx4090-laptop").devices()[0]
    sample = GpuSample(temperature_c=70.0, power_w=100.0, sm_clock_mhz=2000.0, utilization_gpu_pct=90.0,
                       vram_used_mib=1000.0, vram_free_mib=15000.0,
                       clock_event_reasons=int(ClockEventReason.SW_POWER_CAP))
    collector = exporter.SnapshotCollector("h")
    collector.update(Snapshot(1e9, 1.0, SourceInfo("simulated", "t"), (GpuReading(info, DeviceState.OK, sample),)))
    collector.set_last_stress(StressResult(1, 0.0, 1.0, info.uuid, info.name, "gemm", "bf16", "TFLOP/s", 80.0, 70.0,
                                           False, 0, None, "ok"))
    collector.set_recorder_health(exporter.RecorderHealth(True, 1e9, 10, 0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            series.setdefault(s.name, set()).update(s.labels)
    return series


def test_dashboard_metrics_exist_in_the_exporter(repo_root: Path) -> None:
    series = exported_series()
    used = {name for expr in dashboard_exprs(repo_root) for name in re.findall(r"\b(?:rigscope|DCGM_FI)_\w+", expr)}
    assert used, "no metric found in the dashboard"
    assert used - set(series) == set()
    assert any(name.startswith("rigscope_") for name in used)


def test_dashboard_labels_and_reasons_exist(repo_root: Path) -> None:
    series = exported_series()
    reason_labels = {label for _, label in exporter.REASONS}
    for expr in dashboard_exprs(repo_root):
        for name, selector in re.findall(r"\b((?:rigscope|DCGM_FI)_\w+)\{([^}]*)\}", expr):
            for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector):
                # hostname: dcgm-exporter's new name for Hostname, which the dashboard accepts too
                assert label in series[name] or (label == "hostname" and "Hostname" in series[name]), (name, label)
        for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
            assert {g.strip() for g in group.split(",")} <= {"Hostname", "hostname", "gpu", "reason"}, expr
        for alternatives in re.findall(r'reason=~"([^"]+)"', expr):
            assert set(alternatives.split("|")) <= reason_labels, alternatives
