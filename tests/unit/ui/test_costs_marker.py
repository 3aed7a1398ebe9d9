"""Costs page papercuts (issue 14, item 6): a readable "you" marker, inputs as wide as their content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtWidgets import QAbstractSpinBox

from desktop import config
from desktop.advice import Advice, compute_advice
from desktop.config import CostSettings
from desktop.ui.pages.costs_page import CostsPage
from desktop.ui.theme import DARK, LIGHT, Theme
from tests.unit.advisor.demo_frame import TWO_GPUS, demo_week_frame


@pytest.fixture(scope="module")
def advice() -> Advice:
    return compute_advice(demo_week_frame(TWO_GPUS), config.Settings())


def _costs(qtbot, advice: Advice, theme: Theme) -> CostsPage:
    page = CostsPage(lambda: advice, CostSettings(purchase_price=3200.0), theme)
    qtbot.addWidget(page)
    page.resize(1400, 900)
    page.show()
    page.refresh()
    qtbot.waitUntil(lambda: not page.loading, timeout=20_000)
    return page


@pytest.mark.parametrize("theme", [DARK, LIGHT])
def test_the_you_marker_names_the_hours_in_the_text_colour_on_a_filled_label(qtbot, advice: Advice,
                                                                           theme: Theme) -> None:
    page = _costs(qtbot, advice, theme)
    assert page.comparison is not None and page.marker is not None
    label = page.marker.label
    assert label.toPlainText() == f"you: {page.comparison.busy_hours_month:.0f} busy h/month"
    assert label.color.name() == theme.text.lower()
    assert label.fill.color().name() == theme.plot_background.lower()
    assert page.marker.value() == pytest.approx(page.comparison.busy_hours_month)
    page.apply_theme(DARK if theme is LIGHT else LIGHT)  # redrawn in the other theme's colours
    assert page.marker.label.color.name() == (DARK if theme is LIGHT else LIGHT).text.lower()


def test_inputs_are_as_wide_as_their_content(qtbot, advice: Advice, tmp_path: Path) -> None:
    page = _costs(qtbot, advice, DARK)
    for box in (page.price, page.months, page.kwh_price):
        assert isinstance(box, QAbstractSpinBox)
        assert box.width() <= box.sizeHint().width() + 2 < page.width() / 4
    assert page.gpu_combo.width() <= page.gpu_combo.sizeHint().width() + 2
    shots = Path(os.environ.get("RIGSCOPE_SCREENSHOTS", str(tmp_path)))
    page.grab().save(str(shots / "costs-page.png"))
