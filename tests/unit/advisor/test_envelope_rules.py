"""Envelope advice: busy time below the rated power and why (from envelope.limit events); battery's cost."""

from __future__ import annotations

import numpy as np

from advisor.frame import Event
from advisor.rules.base import RuleContext
from advisor.rules.envelope import battery_cost, below_rated_power
from advisor.rules.registry import run_rules
from advisor.thresholds import Thresholds
from tests.unit.advisor.crafted import START_S, STEP_S, N, busy_mask, frame, gpu, host, laptop_meta

POWERD = "capped at 150 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"
RATED = "at its rated power (175 W)"
UUID = "GPU-lap-0"


def _at(minute: int) -> float:
    return START_S + STEP_S * minute


def _laptop_frame(events: tuple[Event, ...], **host_kw: object) -> object:
    return frame((gpu(laptop_meta(), power_w=np.where(busy_mask(), 150.0, 12.0)),), events=events,
                 host=host(**host_kw))  # type: ignore[arg-type]


def test_powerd_stopped_for_40_percent_of_busy_time() -> None:
    # Busy minutes 60-419 (6 h); powerd down from minute 60 to 204: 144 of 360 busy minutes = 40 %.
    events = (Event(_at(0), "envelope.limit", UUID, RATED), Event(_at(60), "envelope.limit", UUID, POWERD),
              Event(_at(204), "envelope.limit", UUID, RATED))
    (rec,) = below_rated_power(RuleContext(_laptop_frame(events), Thresholds()))  # type: ignore[arg-type]
    assert rec.rule_id == "envelope_powerd_stopped" and rec.severity == "warning"
    assert rec.title == ("GPU 0: 40 % of its busy time ran below the rated power because nvidia-powerd was not "
                         "running (no Dynamic Boost)")
    assert rec.evidence_value("Busy time affected") == 2.4
    assert rec.evidence_value("Power limit meanwhile") == 150.0 and rec.evidence_value("Rated power") == 175.0
    assert "sudo systemctl enable --now nvidia-powerd" in rec.action
    assert "-lgc 210," in rec.action and "-pl" not in rec.action
    assert rec.time_ranges == ((_at(60), _at(204)),)


def test_below_the_share_threshold_nothing() -> None:
    events = (Event(_at(0), "envelope.limit", UUID, RATED), Event(_at(60), "envelope.limit", UUID, POWERD),
              Event(_at(90), "envelope.limit", UUID, RATED))  # 30 of 360 busy minutes: 8 %
    assert below_rated_power(RuleContext(_laptop_frame(events), Thresholds())) == []  # type: ignore[arg-type]


def test_eco_mode_names_msi_center() -> None:
    events = (Event(_at(0), "envelope.limit", UUID, "capped at 80 W of 175 W: firmware mode Eco"),)
    (rec,) = below_rated_power(RuleContext(_laptop_frame(events), Thresholds()))  # type: ignore[arg-type]
    assert rec.rule_id == "envelope_firmware_saving" and "Extreme Performance" in rec.action


def test_no_events_or_a_desktop_gpu_says_nothing() -> None:
    assert below_rated_power(RuleContext(_laptop_frame(()), Thresholds())) == []  # type: ignore[arg-type]
    desk = frame(events=(Event(_at(0), "envelope.limit", "GPU-desk-0", POWERD),))
    assert below_rated_power(RuleContext(desk, Thresholds())) == []


def test_training_on_battery_cost() -> None:
    minute = np.arange(N)
    on_ac = np.where((minute >= 300) & (minute < 420), 0.0, 1.0)  # the last 2 busy hours on battery
    clock = np.where(busy_mask(), np.where(on_ac == 0.0, 1200.0, 2000.0), 210.0)
    f = frame((gpu(laptop_meta(), sm_clock_mhz=clock),), host=host(on_ac=on_ac))
    (rec,) = battery_cost(RuleContext(f, Thresholds()))
    assert rec.title == "GPU 0: training on battery cost you 40 % throughput"
    assert rec.evidence_value("Mean SM clock on battery") == 1200.0
    assert rec.evidence_value("Mean SM clock on AC") == 2000.0
    assert "Plug the charger in" in rec.action
    ids = [r.rule_id for r in run_rules(f)]
    assert "envelope_battery_cost" in ids


def test_all_on_ac_no_battery_cost() -> None:
    assert battery_cost(RuleContext(frame((gpu(laptop_meta()),)), Thresholds())) == []


def test_battery_and_balanced_are_left_to_other_rules() -> None:
    events = (Event(_at(0), "envelope.limit", UUID, "capped at 150 W of 175 W: firmware mode Balanced"),
              Event(_at(200), "envelope.limit", UUID, "capped at 56 W of 175 W: on battery"))
    assert below_rated_power(RuleContext(_laptop_frame(events), Thresholds())) == []  # type: ignore[arg-type]


def test_the_clock_lock_hint_is_below_a_clock_the_laptop_sustains_not_the_v_f_top() -> None:
    """Issue 32: an Ada laptop reports 3,105 MHz as its max; 85 % of that (2,640 MHz) locks nothing on a laptop
    running 1,935 MHz. The hint takes 85 % of the clock it held while busy (1,650 MHz), as the reported max of
    a card whose max is a real clock (2,040 -> 1,740 MHz)."""
    events = (Event(_at(0), "envelope.limit", UUID, RATED), Event(_at(60), "envelope.limit", UUID, POWERD),
              Event(_at(204), "envelope.limit", UUID, RATED))
    ada = frame((gpu(laptop_meta(sm_clock_max_mhz=3105.0), power_w=np.where(busy_mask(), 150.0, 12.0),
                     sm_clock_mhz=np.where(busy_mask(), 1935.0, 210.0)),), events=events, host=host())
    (rec,) = below_rated_power(RuleContext(ada, Thresholds()))  # type: ignore[arg-type]
    assert "-lgc 210,1650`" in rec.action and "2640" not in rec.action
    (old,) = below_rated_power(RuleContext(_laptop_frame(events), Thresholds()))  # type: ignore[arg-type]
    assert "-lgc 210,1740`" in old.action
