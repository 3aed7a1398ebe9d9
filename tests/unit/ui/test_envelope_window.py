"""The window on the simulated laptop: unplug it, stop nvidia-powerd, switch its mode; the GPU card follows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _shots(tmp_path: Path) -> Path:
    # RIGSCOPE_SCREENSHOTS=resources/screenshots refreshes the README's picture.
    return Path(os.environ.get("RIGSCOPE_SCREENSHOTS", str(tmp_path)))


def test_the_laptop_power_menu_moves_the_limit_and_its_line(make_app: Any, qtbot: Any, tmp_path: Path) -> None:
    h = make_app()
    app = h.app
    app.window.resize(1280, 800)
    app.window.show()
    h.tick()
    bar = app.dashboard.simulated_bar
    assert not bar.envelope_button.isHidden()
    card = app.dashboard.panels[0].card
    assert card.envelope_label.text() == "Power limit: capped at 150 W of 175 W: firmware mode Balanced"
    bar.mode_actions["turbo"].trigger()
    h.tick()
    assert card.envelope_label.text() == "Power limit: at its rated power (175 W)"
    bar.powerd_action.setChecked(False)
    h.tick()
    assert card.envelope_label.text() == ("Power limit: capped at 150 W of 175 W: nvidia-powerd is not running, "
                                          "so Dynamic Boost is off")
    bar.powerd_action.setChecked(True)
    bar.workload_actions["training"].trigger()
    bar.battery_action.setChecked(True)
    h.tick(90)
    assert card.envelope_label.text() == "Power limit: capped at 56 W of 175 W: on battery"
    assert "56 W" in card.values["power"].text()
    qtbot.wait(20)
    app.dashboard.repaint_plots()
    qtbot.wait(20)
    assert app.window.grab().save(str(_shots(tmp_path) / "dashboard-laptop-on-battery.png"))
    bar.stop_action.trigger()
    h.tick()


def test_the_stress_page_offers_compare_modes_on_the_simulated_laptop(make_app: Any) -> None:
    h = make_app()
    page = h.app.stress
    compare = h.app.mode_compare
    assert compare.page is page and list(compare.mode_actions) == ["turbo", "eco", "comfort"]
    assert page.controls.row.indexOf(compare.button) == page.controls.row.indexOf(page.controls.one_click) - 1
