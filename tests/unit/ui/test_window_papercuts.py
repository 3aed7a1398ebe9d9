"""Window papercuts (issue 14, item 6): plain words on the Settings, Dashboard and Costs pages."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QSpinBox

from advisor.costs import CostInputs, compare
from desktop import config
from desktop.advice import Advice, compute_advice, load_cloud_offers, load_gpu_specs, usage_of
from desktop.config import CostSettings, Settings
from desktop.telemetry.simulated.profiles import parse_profile_list, profile_info
from desktop.ui.pages.costs_page import CostsPage
from desktop.ui.pages.dashboard_history import history_note
from desktop.ui.pages.settings_page import SettingsPage
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.cards import GpuCard, driver_text
from tests.unit.advisor.demo_frame import TWO_GPUS, demo_week_frame


@pytest.fixture(scope="module")
def advice() -> Advice:
    return compute_advice(demo_week_frame(TWO_GPUS), config.Settings())


def _settings_page(qtbot, tmp_path, settings: Settings | None = None) -> SettingsPage:
    page = SettingsPage(settings or Settings(), LIGHT, path=tmp_path / "settings.toml", service=lambda _: None)
    qtbot.addWidget(page)
    page.show()
    return page


def test_zero_days_of_hourly_averages_reads_forever_and_saves_as_0(qtbot, tmp_path) -> None:
    page = _settings_page(qtbot, tmp_path)
    box = page.editors["retention.hour_days"]
    assert isinstance(box, QSpinBox)
    assert box.value() == 0 and box.text() == "forever"
    box.setValue(400)
    assert box.text() == "400 days"
    assert page.save() is True
    assert config.load(tmp_path / "settings.toml")[0].retention.hour_days == 400
    box.setValue(0)
    assert page.save() is True and page.settings.retention.hour_days == 0
    assert (box.minimum(), box.maximum()) == config.allowed_range("retention.hour_days")


def test_the_sampling_interval_field_says_the_one_allowed_range(qtbot, tmp_path) -> None:
    low, high = config.INTERVAL_RANGE_S
    page = _settings_page(qtbot, tmp_path)
    row = page.editors["sampling.interval_s"].parentWidget()
    labels = [label.text() for label in row.findChildren(QLabel)]
    assert f"s ({low:g} to {high:g})" in labels
    page.editors["sampling.interval_s"].setText(f"{high * 2:g}")
    assert page.save() is False
    assert page.errors["sampling.interval_s"].text() == f"must be between {low:g} and {high:g}"


def test_the_history_note_is_plain_words() -> None:
    assert history_note(15 * 60, "raw") == "Before the last 15 min: from the history (every sample)"
    assert history_note(30, "minute") == "Before the last 30 s: from the history (minute averages)"
    assert history_note(3600, "hour") == "Before the last 1 h: from the history (hourly averages)"


def test_a_simulated_gpu_card_says_so_in_plain_words(qtbot) -> None:
    info = profile_info(parse_profile_list("rtx4090-laptop")[0], 0)
    card = GpuCard(info, DARK)
    qtbot.addWidget(card)
    assert card.driver_label.text() == "Simulated GPU (no NVIDIA driver)"
    assert driver_text("560.35.03", "12.6") == "Driver 560.35.03 · CUDA 12.6"
    assert driver_text(None, None) == "Driver n/a"


def _costs(qtbot, advice: Advice, costs: CostSettings) -> CostsPage:
    page = CostsPage(lambda: advice, costs)
    qtbot.addWidget(page)
    page.show()
    page.refresh()
    qtbot.waitUntil(lambda: not page.loading, timeout=20_000)
    return page


def _legend(page: CostsPage) -> list[str]:
    return [item.name() for item in page.chart.getPlotItem().listDataItems()]


def test_the_costs_axis_reads_currency_per_month(qtbot, advice: Advice) -> None:
    page = _costs(qtbot, advice, CostSettings(currency="EUR", purchase_price=3000.0))
    axis = page.chart.getPlotItem().getAxis("left")
    assert axis.labelText == "EUR per month"


def test_no_purchase_price_no_break_even_and_the_page_says_so(qtbot, advice: Advice) -> None:
    page = _costs(qtbot, advice, CostSettings(purchase_price=0.0))
    column = CostsPage.HEADERS.index("break-even (busy h/month)")
    assert page.table.rowCount() > 0
    assert {page.table.item(r, column).text() for r in range(page.table.rowCount())} == {"set a price"}
    assert "owned" not in _legend(page)
    assert page.price_hint.isVisible()
    assert "Set the purchase price above to see the break-even" in page.price_hint.text()
    assert "No purchase price set" not in page.notes.text()  # said once, above
    page.price.setValue(3000.0)
    assert not page.price_hint.isVisible() and "owned" in _legend(page)
    assert page.table.item(0, column).text() != "set a price"


def test_no_purchase_price_set_points_to_the_costs_page(advice: Advice) -> None:
    gpu = advice.frame.gpus[0].meta
    c = compare(gpu.name, gpu.vram_total_mib, usage_of(advice.frame, gpu.index), CostInputs(0.0, 36, 0.3, "USD"),
                offers=load_cloud_offers(), specs=load_gpu_specs())
    note = next(n for n in c.notes if n.startswith("No purchase price set"))
    assert "Costs page" in note and "Settings" not in note
