"""Issue 37 item 6: every message readable in both themes, after a switch too. A label styled by a style sheet
kept the palette of the theme it was first shown in: the Jobs card's title stayed the light theme's near-black
(#1b1b1f) on the dark theme's near-black (#1e1f22) after Settings switched to dark. Every label of every page
and of the status bar is checked after the switch, both ways."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from desktop.config import AppearanceSettings, Settings
from desktop.ui.pages.jobs_page import JobsPage
from desktop.ui.theme import DARK, LIGHT, TEXT_CONTRAST, Theme, contrast_ratio
from tests.unit.ui.conftest import FakeClock
from tests.unit.ui.test_window_sees_other_writers import _after_two_finetune_jobs
from tests.waits import DEADLINE_S, until


def _wait_loaded(qt_app: QApplication, page: QWidget) -> None:
    """A page that reads on a worker (Advisor, Costs, History, Jobs) shows its answer before it is checked."""
    until(lambda: (qt_app.processEvents(), not getattr(page, "loading", False))[1])
    qt_app.processEvents()


def _ink_contrast(page: QWidget, label: QLabel, theme: Theme) -> float:
    """The best contrast of any pixel of ``label`` as drawn on ``page`` against the page's background: the text's."""
    image = page.grab().toImage()
    top_left = label.mapTo(page, QPoint(0, 0))
    colours = Counter(image.pixelColor(x, y).name() for x in range(top_left.x(), top_left.x() + label.width())
                      for y in range(top_left.y(), top_left.y() + label.height()))
    background, _ = colours.most_common(1)[0]
    return max(contrast_ratio(c, background) for c in colours)


@pytest.mark.parametrize("first, then", [(LIGHT, DARK), (DARK, LIGHT)], ids=["light-dark", "dark-light"])
def test_the_jobs_card_title_and_every_label_read_after_a_theme_switch(make_app, tmp_path: Path, first: Theme,
                                                                        then: Theme) -> None:
    h = make_app(clock=FakeClock(start_s=_after_two_finetune_jobs()),
                 settings=Settings(appearance=AppearanceSettings(theme=first.name)))
    app = h.app
    app.window.show()
    h.tick(2)
    app.demo_path = tmp_path / "demo.sqlite"
    app.demo_days = 0.09
    app.load_demo_week()
    app.demo_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    app.window.show_page("stress")  # its verdict card's title too
    app.window.show_page("jobs")
    jobs = app.window.page("jobs")
    assert isinstance(jobs, JobsPage)
    jobs.list_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    jobs.detail_loader.wait(DEADLINE_S)
    app.qt_app.processEvents()
    assert jobs.title.text().startswith("Job #2")
    app.apply_settings(replace(app.settings, appearance=AppearanceSettings(theme=then.name)))
    app.qt_app.processEvents()
    assert _ink_contrast(jobs, jobs.title, then) >= TEXT_CONTRAST
    for key in app.window.page_keys():
        app.window.show_page(key)
        page = app.window.page(key)
        _wait_loaded(app.qt_app, page)
        low = {}
        for label in [*page.findChildren(QLabel), *app.window.statusBar().findChildren(QLabel)]:
            if label.isVisibleTo(app.window) and label.text().strip():
                ink = label.palette().color(label.foregroundRole()).name()
                if contrast_ratio(ink, then.window) < TEXT_CONTRAST:
                    low[label.text()[:40]] = ink
        assert low == {}, (key, low)
