"""The screenshot script grabs every listed page from the running app at 1600x1000."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from tools import screenshots


@pytest.mark.slow
def test_screenshots_are_taken_from_the_running_app(tmp_path, monkeypatch):
    monkeypatch.setattr(screenshots, "LIVE_TICKS", 120)  # enough for live curves, quick
    monkeypatch.setattr(screenshots, "HISTORY_DAYS", 1.0)
    shots = [screenshots.Shot("dashboard", "d.png", "light", window="1 h"),
             screenshots.Shot("processes", "p.png", "dark")]
    paths = screenshots.take(tmp_path, shots)
    assert [p.name for p in paths] == ["d.png", "p.png"]
    for path in paths:
        image = QImage(str(path))
        assert (image.width(), image.height()) == screenshots.SIZE
    # Not a blank frame: a light dashboard has many colours (curves, text), not one background.
    image = QImage(str(paths[0]))
    colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
    assert len(colours) > 20


def test_every_screenshot_the_readme_shows_exists_and_the_alerts_one_is_taken() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    shown = set(re.findall(r"resources/screenshots/([\w.-]+\.png)", (root / "README.md").read_text(encoding="utf-8")))
    assert "alerts.png" in shown  # the window with its alerts showing (issue 37 item 6)
    assert {name for name in shown if not (root / "resources" / "screenshots" / name).is_file()} == set()
    assert "alerts.png" in {shot.file_name for shot in screenshots.SHOTS}
