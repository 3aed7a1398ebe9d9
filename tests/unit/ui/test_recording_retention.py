"""The window's writer rolls up and applies the retention the Settings page applied last."""

from __future__ import annotations

from dataclasses import replace

from desktop.config import RetentionSettings, Settings
from desktop.sessions.recording import RecordingSession
from tests.unit.history.helpers import snapshot

NOW_S = 1_790_000_000.0


def test_settings_applied_in_the_window_reach_the_writers_retention(make_app, tmp_path):
    rec = RecordingSession.open(tmp_path / "h.sqlite", retention=RetentionSettings(raw_days=30, minute_days=365))
    try:
        assert rec.writer is not None and rec.maintenance is not None
        h = make_app(settings=Settings(), recording=rec)
        for i in range(0, 3 * 86400, 600):  # three days, every ten minutes
            rec.writer.submit(snapshot(NOW_S - 3 * 86400 + i))
        assert rec.writer.flush(timeout_s=10)
        h.app.apply_settings(replace(h.app.settings, retention=RetentionSettings(raw_days=1, minute_days=2)))
        # The tick's next pass (it hands the session's maintenance to the writer), run now with a fixed "now".
        maintain = rec.maintenance
        rec.writer.call(lambda store: maintain(store, NOW_S)).result(timeout=60)
        counts = rec.writer.call(lambda store: store.counts()).result(timeout=10)
    finally:
        rec.close()
    assert 0 < counts["gpu_samples"] <= 24 * 6 + 1  # raw rows older than the new day are gone ...
    assert counts["gpu_minute"] > counts["gpu_samples"]  # ... their minute rollups are kept
