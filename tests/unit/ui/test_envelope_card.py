"""The Dashboard's GPU card says why the power limit is where it is, from the snapshot's envelope."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from desktop.ui.pages.dashboard import DashboardPage
from desktop.ui.theme import DARK
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
T0 = 1_795_000_000.0


@pytest.mark.parametrize(("case", "limit_w", "line"), [
    ("on_battery", 55, "Power limit: capped at 55 W of 175 W: on battery"),
    ("powerd_stopped", 115,
     "Power limit: capped at 115 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"),
    ("msi_ec_eco", 80, "Power limit: capped at 80 W of 175 W: firmware mode Eco"),
    ("none", 150, "Power limit: capped at 150 W of 175 W: the cause is not readable here"),
])
def test_dashboard_card_line_over_nvml(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, case: str, limit_w: int,
                                       line: str) -> None:
    root = FIXTURES / case
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(root / "sys"))
    monkeypatch.setenv("RIGSCOPE_PROC_ROOT", str(root / "proc"))
    monkeypatch.setenv("RIGSCOPE_UNIT_DIRS", str(root / "units"))
    FakeNvml([FakeGpu(power_limit_mw=limit_w * 1000)]).install(monkeypatch)
    from desktop.telemetry.nvml import NvmlBackend

    sampler = Sampler(NvmlBackend.open(), clock=lambda: T0)
    try:
        page = DashboardPage(DARK, now=lambda: T0)
        qtbot.addWidget(page)
        page.add_snapshot(sampler.tick())
        label = page.panels[0].card.envelope_label
        assert label.text() == line
        assert not label.isHidden()
    finally:
        sampler.close()


def test_dashboard_card_follows_the_simulated_laptop(qtbot: QtBot) -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    clock = [T0]
    sampler = Sampler(backend, clock=lambda: clock[0])
    page = DashboardPage(DARK, now=lambda: clock[0])
    qtbot.addWidget(page)
    page.add_snapshot(sampler.tick())
    card = page.panels[0].card
    assert card.envelope_label.text() == "Power limit: capped at 150 W of 175 W: firmware mode Balanced"
    backend.machine.set_envelope(on_ac=False)
    clock[0] += 1
    page.add_snapshot(sampler.tick())
    assert card.envelope_label.text() == "Power limit: capped at 56 W of 175 W: on battery"
    assert "On battery" in card.envelope_label.toolTip()
    backend.machine.set_envelope(on_ac=True, shift_mode="turbo")
    clock[0] += 1
    page.add_snapshot(sampler.tick())
    assert card.envelope_label.text() == "Power limit: at its rated power (175 W)"
