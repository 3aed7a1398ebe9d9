"""The demo week's laptop: on battery for the bench.py hour, nvidia-powerd stopped over the idle notebook."""

from __future__ import annotations

import dataclasses

from advisor.frame import Event
from advisor.rules import run_rules
from desktop.history.demo import envelope_events
from desktop.telemetry.scenarios import WeekScenario
from desktop.telemetry.simulated import parse_profile_list, profile_info
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S, TWO_GPUS, demo_week_frame

WEEK_S = 7 * 86400.0


def _events() -> list[tuple[float, str, str | None, str]]:
    profiles = parse_profile_list(TWO_GPUS)
    scenario = WeekScenario([p.vram_total_mib for p in profiles])
    infos = [profile_info(p, i) for i, p in enumerate(profiles)]
    return envelope_events(scenario, infos, DEMO_WEEK_START_S, DEMO_WEEK_START_S + WEEK_S)


def test_demo_week_has_a_battery_and_a_powerd_stretch() -> None:
    events = _events()
    hours = [((t - DEMO_WEEK_START_S) / 3600.0, kind, detail) for t, kind, _uuid, detail in events]
    kinds = [k for _, k, _ in hours]
    assert kinds[0] == "envelope.state"
    assert hours[0][2] == "on AC power; firmware mode Balanced; nvidia-powerd running"
    battery = [h for h, k, d in hours if k == "envelope.ac" and d == "on battery"]
    back = [h for h, k, d in hours if k == "envelope.ac" and d == "on AC power"]
    assert len(battery) == 1 and len(back) == 1 and 0.9 < back[0] - battery[0] < 1.1  # the bench.py hour
    stopped = [h for h, k, d in hours if k == "envelope.powerd" and d == "nvidia-powerd stopped"]
    started = [h for h, k, d in hours if k == "envelope.powerd" and d == "nvidia-powerd started"]
    assert len(stopped) == 1 and len(started) == 1 and started[0] - stopped[0] > 18  # Wed noon to Thu morning
    laptop_lines = {d for _, k, uuid, d in events if k == "envelope.limit" and uuid == "GPU-SIM00-rtx4090-laptop"}
    assert laptop_lines == {"capped at 150 W of 175 W: firmware mode Balanced",
                            "capped at 150 W of 175 W: on battery",
                            "capped at 150 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"}
    desktop_lines = {d for _, k, uuid, d in events if k == "envelope.limit" and uuid == "GPU-SIM01-rtx4090"}
    assert desktop_lines == {"at its rated power (450 W)"}


def test_demo_week_envelope_adds_no_advice_of_its_own() -> None:
    # The powerd stretch covers idle time only, battery is the battery rule's: the demo's advice set stays.
    frame = demo_week_frame(TWO_GPUS)
    with_events = dataclasses.replace(frame, events=tuple(Event(t, k, u, d) for t, k, u, d in _events()))
    ids = sorted(r.rule_id for r in run_rules(with_events))
    assert ids == sorted(r.rule_id for r in run_rules(frame))
    assert not any(i.startswith("envelope_") for i in ids)
