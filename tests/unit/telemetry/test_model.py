"""The metric registry, the clock-event decoder and the value formatter."""

from __future__ import annotations

from dataclasses import fields

from desktop.telemetry.model import (
    METRICS,
    METRICS_BY_NAME,
    THERMAL_REASONS,
    ClockEventReason,
    GpuInfo,
    GpuSample,
    format_value,
)


def test_registry_names_every_sample_field_with_a_unit_and_description() -> None:
    assert [m.name for m in METRICS] == [f.name for f in fields(GpuSample)]
    for metric in METRICS:
        assert metric.label and metric.description
        if metric.max_field is not None:
            assert metric.max_field in {f.name for f in fields(GpuInfo)}


def test_decode_lists_each_reason_and_ignores_unknown_bits() -> None:
    assert ClockEventReason.decode(None) == []
    assert ClockEventReason.decode(0) == []
    assert ClockEventReason.decode(0x44) == [ClockEventReason.SW_POWER_CAP, ClockEventReason.HW_THERMAL_SLOWDOWN]
    assert ClockEventReason.decode(0x8000 | 0x1) == [ClockEventReason.GPU_IDLE]
    assert ClockEventReason.HW_THERMAL_SLOWDOWN.label == "HW thermal"
    assert ClockEventReason.SW_THERMAL_SLOWDOWN in THERMAL_REASONS


def test_format_value_shows_units_and_na() -> None:
    assert format_value(METRICS_BY_NAME["temperature_c"], 71.6) == "72 °C"
    assert format_value(METRICS_BY_NAME["power_w"], 148.25, digits=1) == "148.2 W"
    assert format_value(METRICS_BY_NAME["vram_used_mib"], 12345) == "12,345 MiB"
    assert format_value(METRICS_BY_NAME["fan_pct"], None) == "n/a"
    assert format_value(METRICS_BY_NAME["clock_event_reasons"], 0x44) == "0x44"
