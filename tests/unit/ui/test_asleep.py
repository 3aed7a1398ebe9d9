"""A laptop GPU the driver put to sleep: an ASLEEP badge, "asleep" in the tray, and no alert."""

from __future__ import annotations

from desktop.config import AlertSettings
from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample, Snapshot, SourceInfo
from desktop.ui.alerts import AlertMonitor
from desktop.ui.theme import DARK
from desktop.ui.tray import tooltip_for
from desktop.ui.widgets.cards import GpuCard

INFO = GpuInfo(index=0, uuid="GPU-laptop", name="NVIDIA GeForce RTX 4070 Laptop GPU", vram_total_mib=8188.0)
SOURCE = SourceInfo("nvml", "NVML")
ASLEEP = GpuReading(INFO, DeviceState.ASLEEP, None, "asleep: the driver has powered the GPU down")
AWAKE = GpuReading(INFO, DeviceState.OK, GpuSample(temperature_c=45.0, utilization_gpu_pct=3.0))


def _snap(time_s: float, reading: GpuReading) -> Snapshot:
    return Snapshot(time_s=time_s, monotonic_s=time_s, source=SOURCE, gpus=(reading,))


def test_the_card_shows_an_asleep_badge_and_n_a_values(qtbot) -> None:
    card = GpuCard(INFO, DARK)
    qtbot.addWidget(card)
    card.update_reading(AWAKE)
    assert card.badge.text() == "OK"
    card.update_reading(ASLEEP)
    assert card.badge.text() == "ASLEEP" and card.state is DeviceState.ASLEEP
    assert card.values["temperature"].text() == "n/a"
    assert "powered the GPU down" in card.badge.toolTip()
    card.update_reading(AWAKE)
    assert card.badge.text() == "OK" and card.values["temperature"].text() == "45 °C"


def test_the_tray_says_asleep_not_lost() -> None:
    text = tooltip_for(_snap(0.0, ASLEEP))
    assert "GPU 0: asleep" in text and "lost" not in text


def test_a_sleeping_gpu_raises_no_alert() -> None:
    monitor = AlertMonitor(AlertSettings(debounce_s=0.0, temperature_c=40.0))
    for t in range(5):
        assert monitor.check(_snap(float(t), ASLEEP)) == []
    assert [a.kind for a in monitor.check(_snap(10.0, AWAKE))] == ["temperature"]  # awake and hot: it still alerts
