"""The Stress page says, under the verdict, why the GPU's power limit was where it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from advisor.verdict import Verdict
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import LIGHT, resolve
from desktop.ui.widgets.stress_verdict_card import VerdictCard
from tests.unit.ui.test_stress_page import sim_runners


def _verdict() -> Verdict:
    return Verdict(status="passed", throttled=False, onset_s=None, peak=70.0, sustained=70.0, sustained_ratio=1.0,
                   unit="TFLOP/s", basis="throughput", clock_ratio=None, cause=None, cause_family=None,
                   onset_temperature_c=None, sentence="Passed.", comparison="")


def test_verdict_card_shows_the_line_escaped(qtbot: QtBot) -> None:
    card = VerdictCard(LIGHT)
    qtbot.addWidget(card)
    card.show_verdict(_verdict(), "capped at 80 W of 175 W: firmware mode Eco\x1b[31m")
    assert card.text.text().startswith("Passed.\nPower limit: capped at 80 W of 175 W: firmware mode Eco")
    assert "\x1b" not in card.text.text()
    card.show_verdict(_verdict())
    assert card.text.text() == "Passed."


def test_quick_run_on_the_simulated_laptop_names_its_limit(qtbot: QtBot) -> None:
    page = StressPage(resolve("light"), sim_runners(), db_path=None, device="sim")
    qtbot.addWidget(page)
    page.controls.presets.button(0).setChecked(True)  # Quick 2 min
    page.start()
    with qtbot.waitSignal(page.finished, timeout=60_000):
        pass
    assert page.verdict_text.text().endswith("\nPower limit: capped at 150 W of 175 W: firmware mode Balanced.")


def _compare_page(qtbot: QtBot, asked: list[str] | None = None, switch: object = None) -> tuple[object, object]:
    from desktop.stress.per_mode import SimulatedModes
    from desktop.stress.run_model import SimClock
    from desktop.stress.runner_factory import runner_factory
    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
    from desktop.ui.pages.stress_modes import ModeCompare

    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)
    make = runner_factory(backend.view, clock=SimClock(real_s_per_s=0.002))
    page = StressPage(resolve("light"), make, db_path=None, device="sim")
    qtbot.addWidget(page)
    ask_log = asked if asked is not None else []
    compare = ModeCompare(page, switch or SimulatedModes(backend.machine),  # type: ignore[arg-type]
                          ask=lambda text: ask_log.append(text) is None)
    return page, compare


def test_compare_modes_runs_the_quick_test_per_mode_and_compares(qtbot: QtBot) -> None:
    page, compare = _compare_page(qtbot)
    assert [a.text() for a in compare.mode_actions.values()] == ["Extreme Performance", "Eco", "Balanced"]
    compare.mode_actions["comfort"].setChecked(False)
    compare.run_action.trigger()
    assert compare.active and page.running
    qtbot.waitUntil(lambda: not compare.active, timeout=60_000)
    assert [r.name for r in compare.runs] == ["Extreme Performance", "Eco"]
    assert [r.result.extra["power_limit_line"] for r in compare.runs] == [
        "at its rated power (175 W)", "capped at 80 W of 175 W: firmware mode Eco"]
    text = page.verdict_card.comparison.text()
    assert text.startswith("Extreme Performance buys ") and " over Eco at +" in text.splitlines()[0]
    assert "Eco: " in text and " W, " in text
    assert "\\x0a" not in text and text.splitlines()[2].startswith("Eco: ")  # one line each, not an escaped newline


def test_compare_modes_asks_where_it_may_not_switch(qtbot: QtBot) -> None:
    from desktop.stress.per_mode import SimulatedModes

    class AskFirst(SimulatedModes):
        """A switch that may not write (a real laptop without --switch-modes): the test's 'user' switches."""

        def set(self, mode: str) -> bool:
            self.machine.set_envelope(shift_mode=mode)  # what the user does in MSI Center
            return False

    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

    asked: list[str] = []
    machine = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad()).machine
    page, compare = _compare_page(qtbot, asked, AskFirst(machine))
    compare.mode_actions["comfort"].setChecked(False)
    compare.mode_actions["eco"].setChecked(False)
    compare.run_action.trigger()  # one mode only: refused before anything runs
    assert not page.running and asked == []
    assert "at least two" in page.verdict_card.text.text()
    compare.mode_actions["eco"].setChecked(True)
    compare.run_action.trigger()
    qtbot.waitUntil(lambda: not compare.active, timeout=60_000)
    assert asked == ["Switch the firmware to Extreme Performance (simulated turbo), then press OK.",
                     "Switch the firmware to Eco (simulated eco), then press OK."]
    assert [r.name for r in compare.runs] == ["Extreme Performance", "Eco"]  # as read back after asking


def test_compare_modes_cancelled_when_the_user_declines(qtbot: QtBot) -> None:
    from desktop.stress.per_mode import SimulatedModes
    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
    from desktop.ui.pages.stress_modes import ModeCompare

    class Refuses(SimulatedModes):
        def set(self, mode: str) -> bool:
            return False

    page, _compare = _compare_page(qtbot)
    machine = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad()).machine
    declined = ModeCompare(page, Refuses(machine), ask=lambda _text: False)
    declined.run_action.trigger()
    assert not page.running and not declined.active
    assert page.verdict_card.text.text() == "Mode comparison cancelled."


def test_compare_modes_puts_back_the_mode_it_found(qtbot: QtBot) -> None:
    """Issue 34 item 1: a laptop found in Balanced is in Balanced again after comparing Extreme Performance, Eco."""
    page, compare = _compare_page(qtbot)
    machine = compare.switch.machine  # type: ignore[attr-defined]
    assert machine.envelope_state.shift_mode == "comfort"
    compare.mode_actions["comfort"].setChecked(False)
    compare.run_action.trigger()
    qtbot.waitUntil(lambda: not compare.active, timeout=60_000)
    assert [r.name for r in compare.runs] == ["Extreme Performance", "Eco"]
    assert machine.envelope_state.shift_mode == "comfort"
    assert page.verdict_card.comparison.text().splitlines()[-1] == "Restored firmware mode Balanced."


def test_compare_modes_cancelled_or_quit_mid_run_puts_back_the_mode(qtbot: QtBot) -> None:
    page, compare = _compare_page(qtbot)
    machine = compare.switch.machine  # type: ignore[attr-defined]
    compare.mode_actions["comfort"].setChecked(False)
    compare.run_action.trigger()
    assert machine.envelope_state.shift_mode == "turbo" and page.running
    page.cancel()  # the Stress page's Cancel
    qtbot.waitUntil(lambda: not compare.active, timeout=60_000)
    assert [r.name for r in compare.runs] == ["Extreme Performance"]  # no further mode after a cancelled run
    assert machine.envelope_state.shift_mode == "comfort"
    assert "Restored firmware mode Balanced." in page.verdict_card.comparison.text()
    compare.run_action.trigger()  # and the window quitting in the middle of a comparison
    assert machine.envelope_state.shift_mode == "turbo"
    compare.shutdown()
    page.shutdown()
    assert machine.envelope_state.shift_mode == "comfort" and not compare.active


def test_the_window_start_restores_a_mode_a_killed_run_left(make_app: Any, tmp_path: Path) -> None:
    """A `stress --per-mode` killed in Eco left its state file: the window's start puts Balanced back and says so."""
    import json
    import os

    from desktop.stress.mode_restore import STATE_NAME

    ec = tmp_path / "sys" / "devices" / "platform" / "msi-ec"
    ec.mkdir(parents=True)
    (ec / "shift_mode").write_text("eco\n")
    state = Path(os.environ["RIGSCOPE_STATE_DIR"])
    state.mkdir(parents=True, exist_ok=True)
    (state / STATE_NAME).write_text(json.dumps({"kind": "msi-ec", "mode": "comfort", "file": str(ec / "shift_mode"),
                                                "sysfs_root": str(tmp_path / "sys"), "pid": 4321, "since_s": 0.0}))
    h = make_app()
    h.app.start(show=False)
    assert (ec / "shift_mode").read_text() == "comfort\n" and not (state / STATE_NAME).exists()
    assert h.app.window.banners.texts() == [
        "Restored firmware mode Balanced (a run that ended without restoring it, pid 4321, had switched it)."]


def test_compare_modes_cools_down_between_modes_as_the_command_line_does(qtbot: QtBot) -> None:
    """Issue 35 item 2: the window's comparison is `run_modes`'s steps, cool-down included: the second mode
    starts once the GPU is back near the first run's start temperature, not hot from the first run."""
    from desktop.stress.per_mode import COOL_LIMIT_S, COOL_MARGIN_C, SimulatedModes
    from desktop.stress.run_model import SimClock
    from desktop.stress.runner_factory import runner_factory
    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
    from desktop.ui.pages.stress_modes import ModeCompare

    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)
    clock = SimClock(real_s_per_s=0.002)
    page = StressPage(resolve("light"), runner_factory(backend.view, clock=clock), db_path=None, device="sim")
    qtbot.addWidget(page)
    view = backend.view()

    def read(index: int) -> float | None:
        sample = view.sample(clock.now())[index].sample
        return sample.temperature_c if sample is not None else None

    compare = ModeCompare(page, SimulatedModes(backend.machine), ask=lambda _text: True, read_temperature=read,
                          clock=clock)
    compare.mode_actions["comfort"].setChecked(False)
    start_c = read(0)
    assert start_c is not None
    compare.run_action.trigger()
    qtbot.waitUntil(lambda: not compare.active, timeout=60_000)
    first, second = (run.result for run in compare.runs)
    idled_s = second.started_s - first.ended_s
    first_end_c = float(first.columns["temperature_c"][-1])
    second_start_c = float(second.columns["temperature_c"][0])
    assert first_end_c > start_c + 2 * COOL_MARGIN_C  # the first mode heated it: there was something to wait for
    assert second_start_c <= start_c + COOL_MARGIN_C + 1.0 or idled_s >= COOL_LIMIT_S
    assert second_start_c < first_end_c - COOL_MARGIN_C and idled_s > 10.0


def test_while_compare_modes_cools_down_start_is_held_and_cancel_ends_it(qtbot: QtBot) -> None:
    """The cool-down between modes is the comparison's: Start stays off (a run started there would be taken for
    the next mode's), Cancel stays on and ends the comparison, and the mode found is put back."""
    from desktop.stress.per_mode import SimulatedModes
    from desktop.stress.run_model import SimClock
    from desktop.stress.runner_factory import runner_factory
    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
    from desktop.ui.pages.stress_modes import ModeCompare

    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=5)
    clock = SimClock(real_s_per_s=0.02)  # 180 simulated seconds of cooling: several real seconds to look at
    page = StressPage(resolve("light"), runner_factory(backend.view, clock=clock), db_path=None, device="sim")
    qtbot.addWidget(page)
    view = backend.view()

    def read(index: int) -> float | None:
        sample = view.sample(clock.now())[index].sample
        return sample.temperature_c if sample is not None else None

    compare = ModeCompare(page, SimulatedModes(backend.machine), ask=lambda _text: True, read_temperature=read,
                          clock=clock)
    compare.mode_actions["comfort"].setChecked(False)
    compare.run_action.trigger()
    qtbot.waitUntil(lambda: compare.cooling.busy, timeout=60_000)
    assert not page.running and not page.controls.one_click.isEnabled() and page.controls.cancel_button.isEnabled()
    assert page.live.progress_bar.format() == "Cooling down before Eco…"
    page.start()  # the tray's or a shortcut's start: held off
    assert not page.running
    page.controls.cancel_button.click()
    qtbot.waitUntil(lambda: not compare.active, timeout=10_000)
    assert [r.name for r in compare.runs] == ["Extreme Performance"]
    assert backend.machine.envelope_state.shift_mode == "comfort"
    assert page.controls.one_click.isEnabled() and not page.controls.cancel_button.isEnabled()
    assert "Restored firmware mode Balanced." in page.verdict_card.comparison.text()
