"""The README's Processes screenshot: the processes listed beside the demo's training job hold part of the VRAM
the GPU reports used, never more than it (the page showed more MiB held than the card has)."""

from __future__ import annotations

from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.telemetry.simulated import parse_profile_list
from tools import screenshots


def test_the_screenshots_processes_hold_no_more_than_the_gpu_reports_used() -> None:
    profiles = parse_profile_list(screenshots.PROFILE)
    scenario = WeekScenario([p.vram_total_mib for p in profiles])
    end_s = week_start(1_795_000_000.0) + screenshots.LIVE_END_OFFSET_S  # the shot's instant: Monday's training
    backend = screenshots._DemoProcesses(profiles, scenario, screenshots._Clock(end_s))
    backend.model.advance(end_s)
    held = sum(p.vram_mib or 0.0 for p in backend.processes() if p.gpu_index == 0)
    [reading] = backend.sample(end_s)
    assert reading.sample is not None and reading.sample.vram_used_mib is not None
    assert held > 10_000  # the training job is there
    assert held <= reading.sample.vram_used_mib <= reading.info.vram_total_mib
