"""One clock-event vocabulary: the advisor, the telemetry model and the stress verdict read the same enum."""

from __future__ import annotations

from advisor import causes, stats
from advisor.clock_events import (
    CLOCK_EVENT_COUNTERS,
    POWER_REASONS,
    SINGLE_REASONS,
    THERMAL_REASONS,
    THROTTLE_REASONS,
    ClockEventReason,
    bits,
)
from desktop.telemetry import model


def test_the_telemetry_model_re_exports_the_same_objects() -> None:
    assert model.ClockEventReason is ClockEventReason
    assert model.THROTTLE_REASONS is THROTTLE_REASONS and model.CLOCK_EVENT_COUNTERS is CLOCK_EVENT_COUNTERS


def test_bits_labels_and_families() -> None:
    assert [int(r) for r in SINGLE_REASONS] == [1 << i for i in range(11)]
    assert bits(THERMAL_REASONS) == (0x20, 0x40) and bits(POWER_REASONS) == (0x4, 0x80)
    assert ClockEventReason.HW_THERMAL_SLOWDOWN.label == "HW thermal"
    assert ClockEventReason.HW_THERMAL_SLOWDOWN.phrase == "HW thermal slowdown"
    assert ClockEventReason.GPU_IDLE.phrase == "GPU idle"  # no sentence form: the label
    families = {r: r.family for r in SINGLE_REASONS if r.family}
    assert families == {
        ClockEventReason.SW_POWER_CAP: "power", ClockEventReason.HW_SLOWDOWN: "hw_slowdown",
        ClockEventReason.SW_THERMAL_SLOWDOWN: "thermal", ClockEventReason.HW_THERMAL_SLOWDOWN: "thermal",
        ClockEventReason.HW_POWER_BRAKE_SLOWDOWN: "power",
    }
    assert set(families) == set(ClockEventReason.decode(int(THROTTLE_REASONS)))


def test_every_counter_is_a_gpu_metric_and_a_throttle_reason() -> None:
    for name, reason in CLOCK_EVENT_COUNTERS:
        assert name in model.METRICS_BY_NAME and reason in THROTTLE_REASONS


def test_the_advisor_and_the_verdict_use_the_same_bits() -> None:
    assert dict(stats.THROTTLE_CAUSES) == {"thermal": (0x20, 0x40), "power cap": (0x4, 0x80), "HW slowdown": (0x8,)}
    assert causes.CAUSE_BITS == {"hw_thermal": 0x40, "sw_thermal": 0x20, "power_cap": 0x4, "power_brake": 0x80,
                                 "hw_slowdown": 0x8}
    assert causes.CAUSE_COUNTER_FIELDS == {"power_cap": "clock_event_sw_power_cap_s",
                                           "sw_thermal": "clock_event_sw_thermal_s",
                                           "hw_thermal": "clock_event_hw_thermal_s",
                                           "power_brake": "clock_event_hw_power_brake_s"}
    assert causes.CAUSE_LABELS["hw_thermal"] == "HW thermal slowdown" and causes.CAUSE_FAMILY["power_brake"] == "power"
