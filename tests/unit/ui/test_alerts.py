"""Alerts fire once per episode, are debounced, and reach the banner, the tray and the history."""

from __future__ import annotations

from desktop.config import AlertSettings, Settings
from desktop.telemetry.model import ClockEventReason, DeviceState, GpuInfo, GpuReading, GpuSample, Snapshot, SourceInfo
from desktop.ui.alerts import AlertMonitor

INFO = GpuInfo(index=0, uuid="GPU-test", name="Test GPU", vram_total_mib=1000.0)
SOURCE = SourceInfo("simulated", "test")


def snap(time_s: float, temp_c: float = 50.0, vram_mib: float = 100.0, reasons: int = 0,
         lost: bool = False) -> Snapshot:
    if lost:
        reading = GpuReading(INFO, DeviceState.LOST, None, "fell off the bus")
    else:
        reading = GpuReading(INFO, DeviceState.OK, GpuSample(temperature_c=temp_c, vram_used_mib=vram_mib,
                                                             clock_event_reasons=reasons))
    return Snapshot(time_s=time_s, monotonic_s=time_s, source=SOURCE, gpus=(reading,))


def kinds(alerts):
    return [a.kind for a in alerts]


def test_a_hot_gpu_alerts_once_per_episode():
    monitor = AlertMonitor(AlertSettings(temperature_c=85.0, debounce_s=0.0))
    assert monitor.check(snap(0, temp_c=80)) == []
    first = monitor.check(snap(1, temp_c=86))
    assert kinds(first) == ["temperature"]
    assert "86 °C" in first[0].message
    for t in range(2, 30):  # still hot: the same episode, no repeats
        assert monitor.check(snap(t, temp_c=88)) == []
    assert monitor.check(snap(30, temp_c=84)) == []  # inside the hysteresis band: episode goes on
    assert monitor.check(snap(31, temp_c=80)) == []  # ends
    assert kinds(monitor.check(snap(32, temp_c=86))) == ["temperature"]  # a new episode


def test_a_new_episode_within_the_debounce_time_stays_quiet():
    monitor = AlertMonitor(AlertSettings(temperature_c=85.0, debounce_s=60.0))
    assert kinds(monitor.check(snap(0, temp_c=90))) == ["temperature"]
    monitor.check(snap(1, temp_c=70))
    assert monitor.check(snap(10, temp_c=90)) == []  # flapping: suppressed
    monitor.check(snap(11, temp_c=70))
    assert kinds(monitor.check(snap(100, temp_c=90))) == ["temperature"]


def test_vram_throttle_and_lost_alerts():
    monitor = AlertMonitor(AlertSettings(vram_pct=95.0, throttle_s=30.0, debounce_s=0.0))
    assert kinds(monitor.check(snap(0, vram_mib=960))) == ["vram"]
    power_cap = int(ClockEventReason.SW_POWER_CAP)
    fired = [a for t in range(1, 40) for a in monitor.check(snap(t, reasons=power_cap))]
    assert kinds(fired) == ["throttle"]
    assert fired[0].time_s == 31  # held back for 30 s
    assert "Power cap" in fired[0].message
    idle = int(ClockEventReason.GPU_IDLE)  # idle is not throttling
    assert all(monitor.check(snap(t, reasons=idle)) == [] for t in range(40, 100))
    assert kinds(monitor.check(snap(100, lost=True))) == ["lost"]
    assert monitor.check(snap(101, lost=True)) == []


def test_gpu_lost_alert_can_be_switched_off():
    monitor = AlertMonitor(AlertSettings(gpu_lost=False))
    assert monitor.check(snap(0, lost=True)) == []


def test_the_app_shows_an_alert_in_the_banner_and_tray_and_records_it(make_app):
    settings = Settings(alerts=AlertSettings(vram_pct=50.0, debounce_s=0.0))
    h = make_app(settings=settings, tray=True)
    h.app.window.show()
    h.backend.manual.set(0, 0.5, 12000.0)  # 12 GB of 16 GB: over 50 %
    h.tick(5)
    vram = [a for a in h.app.fired if a.kind == "vram"]
    assert len(vram) == 1
    assert h.app.window.alert_button.isVisible() and "VRAM" in h.app.window.alert_button.summary
    assert "VRAM" in h.app.window.banner.label.text()
    assert [n for n in h.app.tray.notifications if "VRAM" in n[1]] and len(h.app.tray.notifications) == 1
    # The simulated laptop's power envelope is recorded too (envelope.*, issue 25): the alerts are what count here.
    events = [e for e in h.app.recording.writer.events if e[1].startswith("alert.")]
    assert len(events) == 1 and events[0][1] == "alert.vram" and events[0][2] == h.backend.devices()[0].uuid


def test_the_monitor_says_which_episodes_ended():
    monitor = AlertMonitor(AlertSettings(vram_pct=95.0, debounce_s=0.0))
    assert kinds(monitor.check(snap(0, vram_mib=1000))) == ["vram"]
    assert monitor.ended == []
    monitor.check(snap(1, vram_mib=980))  # still full: the same episode
    assert monitor.ended == []
    monitor.check(snap(2, vram_mib=320))
    assert monitor.ended == [("vram", "GPU-test")]
    monitor.check(snap(3, vram_mib=320))
    assert monitor.ended == []  # said once


def test_an_alert_banner_goes_when_its_condition_ends(make_app):
    settings = Settings(alerts=AlertSettings(vram_pct=95.0, debounce_s=0.0))
    h = make_app(settings=settings)
    h.app.window.show()
    h.backend.manual.set(0, 0.5, 16376.0)  # VRAM 100 % full
    h.tick(3)
    assert any("VRAM is 100 % full" in t for t in h.app.window.banners.texts())
    h.app.window.show_banner("Some settings were invalid", "warning")  # not an alert: stays
    h.backend.manual.set(0, 0.5, 320.0)
    h.tick(3)
    assert not any("VRAM" in t for t in h.app.window.banners.texts()), h.app.window.banners.texts()
    assert "Some settings were invalid" in h.app.window.banners.texts()
