"""The window's Stress page: Settings' [stress] guard reaches the run through the stress session's config
(the app's runner factory only gives the runner the window's backend and clock)."""

from __future__ import annotations

from typing import Any

from desktop.config import Settings, StressSettings
from desktop.stress.run_model import SimClock


def test_the_stress_settings_guard_goes_into_the_sessions_config_and_stops_the_run(make_app: Any, qtbot: Any) -> None:
    settings = Settings(stress=StressSettings(guard_offset_c=2.0, guard_temperature_c=70.0))
    app = make_app(settings=settings).app
    app.stress_clock = SimClock(real_s_per_s=0.0)
    page = app.stress  # built now, with the factory and the settings
    assert (page.selected_config().guard_offset_c, page.selected_config().guard_absolute_c) == (2.0, 70.0)
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.controls.one_click.click()
        worker = page.worker
        assert worker is not None
    session_config = worker.session.config
    assert (session_config.guard_offset_c, session_config.guard_absolute_c) == (2.0, 70.0)
    result = page.result
    assert result is not None and result.config == worker.session.runner.config  # what ran is what the session said
    assert (result.config.guard_offset_c, result.config.guard_absolute_c) == (2.0, 70.0)
    # The simulated laptop heats past 70 °C in a sustained run: the settings' guard stopped it there.
    assert result.status == "guard" and "70 °C" in result.message, result.message
    assert page.live.charts.plot("temperature_c")._limits["guard"][0].value() == 70.0
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
