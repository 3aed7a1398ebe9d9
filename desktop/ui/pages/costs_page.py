"""The Costs page: own vs rent, from the busy hours and energy the history measured.

Inputs (purchase price, amortisation, electricity price) are settings too: ``costs_changed``
carries them for the app to save. The comparison table and the break-even chart are
recomputed as the inputs change. Wiring (app.py)::

    window.add_page("costs", "Costs", CostsPage(source.advice, settings.costs, theme))
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from advisor.costs import CostComparison, CostInputs, break_even_curve, break_even_text, compare, cost_answer
from desktop.advice import Advice, load_cloud_offers, load_gpu_specs, usage_of
from desktop.config import CostSettings
from desktop.ui.pages.advice_page import AdvicePage, AdviceSource, plain_label
from desktop.ui.theme import DARK, Theme

#: What the page says while the purchase price is 0 (not set).
NO_PRICE_TEXT = ("No purchase price set: owning counts electricity only. "
                 "Set the purchase price above to see the break-even.")
#: The purchase price field while it is 0: a price not given, never a price of 0.
NO_PRICE_FIELD = "not set"


def you_marker(busy_hours_month: float, theme: Theme) -> pg.InfiniteLine:
    """The vertical line at the measured busy hours, labelled in the text colour on the plot background."""
    return pg.InfiniteLine(busy_hours_month, angle=90, pen=pg.mkPen(theme.text, width=1, style=Qt.PenStyle.DashLine),
                           label=f"you: {busy_hours_month:.0f} busy h/month",
                           labelOpts={"position": 0.93, "color": theme.text, "fill": theme.plot_background,
                                      "border": theme.muted, "anchors": [(0, 0.5), (0, 0.5)]})


class CostsPage(AdvicePage):
    """Own vs rent: inputs, the comparison table and the break-even chart, recomputed as inputs change."""

    LOADING_TEXT = "Reading the busy hours and energy from the history..."

    costs_changed = Signal(object)  # CostSettings, for the app to save

    HEADERS = ("cloud GPU", "provider", "speed", "hours/month", "on demand/month", "spot/month",
               "break-even (busy h/month)", "price source")

    def __init__(self, source: AdviceSource, costs: CostSettings, theme: Theme = DARK,
                 offers: list[Any] | None = None, specs: list[Any] | None = None) -> None:
        super().__init__(source)
        self.theme = theme
        self.offers = load_cloud_offers() if offers is None else offers
        self.specs = load_gpu_specs() if specs is None else specs
        self.comparison: CostComparison | None = None
        #: The "you" line at the busy hours per month measured (None until there is history).
        self.marker: pg.InfiniteLine | None = None
        self.currency = costs.currency
        layout = QVBoxLayout(self)
        #: The one-sentence answer (advisor.costs.cost_answer): renting vs owning, and when owning pays off.
        self.answer = plain_label("", bold=True)
        layout.addWidget(self.answer)
        form = QFormLayout()
        # Inputs as wide as their content, not stretched across the page.
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.gpu_combo = QComboBox()
        self.gpu_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.price = QDoubleSpinBox(maximum=10_000_000.0, decimals=0, singleStep=100.0, value=costs.purchase_price)
        self.price.setSpecialValueText(NO_PRICE_FIELD)
        self.months = QSpinBox(minimum=1, maximum=240, value=costs.amortisation_months)
        self.kwh_price = QDoubleSpinBox(maximum=10.0, decimals=3, singleStep=0.01,
                                        value=costs.electricity_price_per_kwh)
        form.addRow("GPU", self.gpu_combo)
        form.addRow(f"Purchase price ({costs.currency})", self.price)
        form.addRow("Amortisation (months)", self.months)
        form.addRow(f"Electricity ({costs.currency}/kWh)", self.kwh_price)
        layout.addLayout(form)
        #: Shown while no purchase price is set: without one there is no break-even to show.
        self.price_hint = plain_label(NO_PRICE_TEXT)
        self.price_hint.hide()
        layout.addWidget(self.price_hint)
        self.summary = plain_label("")
        layout.addWidget(self.summary)
        self.table = QTableWidget(0, len(self.HEADERS))
        self.table.setHorizontalHeaderLabels(list(self.HEADERS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        self.chart = pg.PlotWidget()
        self.chart.setBackground(theme.plot_background)
        self.chart.setLabel("bottom", "busy hours per month")
        self.chart.setLabel("left", f"{costs.currency} per month")
        self.chart.addLegend(offset=(10, 5))
        self.chart.setMinimumHeight(240)
        layout.addWidget(self.chart, 1)
        self.notes = plain_label("")
        layout.addWidget(self.notes)
        for box in (self.price, self.months, self.kwh_price):
            box.valueChanged.connect(self._inputs_changed)
        self.gpu_combo.currentIndexChanged.connect(lambda _: self.recompute())

    def show_status(self, text: str) -> None:
        self.summary.setText(text)

    def page_shown(self) -> None:
        """Each visit reads the history again, keeping the figures shown meanwhile: a stress run or new
        history since changes them ("Run a stress test" stayed after one ran)."""
        if self.advice is None or self.loading:
            super().page_shown()
            return
        self.loader.run(self.source, self._loaded, self._failed)

    def set_advice(self, advice: Advice | None) -> None:
        self.advice = advice
        self.gpu_combo.blockSignals(True)
        self.gpu_combo.clear()
        for gpu in advice.frame.gpus if advice else ():
            # By identity: an imported machine's GPU 0 beside the local GPU 0 is another GPU.
            self.gpu_combo.addItem(f"GPU {gpu.meta.index}: {gpu.meta.name}", gpu.meta.key)
        self.gpu_combo.blockSignals(False)
        self.recompute()

    def apply_theme(self, theme: Theme) -> None:
        """Redraw the chart in the new theme's colours (the owned line uses the text colour)."""
        self.theme = theme
        self.chart.setBackground(theme.plot_background)
        self.recompute()

    def settings(self) -> CostSettings:
        return CostSettings(electricity_price_per_kwh=self.kwh_price.value(), currency=self.currency,
                            purchase_price=self.price.value(), amortisation_months=self.months.value())

    def _inputs_changed(self) -> None:
        self.costs_changed.emit(self.settings())
        self.recompute()

    def recompute(self) -> None:
        advice = self.advice
        key = self.gpu_combo.currentData()
        gpu = advice.frame.gpu_by_key(str(key)) if advice is not None and key is not None else None
        self.table.setRowCount(0)
        self.chart.clear()
        self.marker = None
        priced = self.price.value() > 0
        self.price_hint.setVisible(not priced)
        if advice is None or gpu is None:
            self.summary.setText("No history yet: costs are computed from the hours your GPU was busy.")
            self.answer.setText("")
            self.comparison = None
            return
        s = self.settings()
        inputs = CostInputs(s.purchase_price, s.amortisation_months, s.electricity_price_per_kwh, s.currency)
        c = compare(gpu.meta.name, gpu.meta.vram_total_mib, usage_of(advice.frame, gpu), inputs,
                    offers=self.offers, specs=self.specs, gpu_key=gpu.meta.key)
        self.comparison = c
        self.answer.setText(cost_answer(c, "above"))
        shortfall = advice.shortfall()
        # Only busy hours extrapolate: "extrapolate that to a month" above "0 busy h/month" said nothing.
        extrapolated = (f"{shortfall} The figures below extrapolate that to a month.\n"
                        if shortfall is not None and c.busy_hours_month > 0 else
                        f"{shortfall}\n" if shortfall is not None else "")
        owned_text = (f"{c.owned_month:,.2f} {s.currency}/month (amortisation {c.owned_fixed_month:,.2f} + electricity "
                 f"{c.owned_energy_month:,.2f})" if c.priced else
                 f"{c.owned_energy_month:,.2f} {s.currency}/month in electricity")
        self.summary.setText(
            extrapolated + f"From {c.history_text}: {c.busy_hours_month:.0f} busy hours/month and "
            f"{c.energy_kwh_month:.1f} kWh/month. Owned: {owned_text}.")
        for o in c.options:
            row = self.table.rowCount()
            self.table.insertRow(row)
            cells = (o.offer.gpu_model, o.offer.provider, f"{o.relative_speed:.2f}x", f"{o.cloud_hours_month:.1f}",
                     f"{o.on_demand_month:,.2f}", f"{o.spot_month:,.2f}" if o.spot_month is not None else "-",
                     break_even_text(c, o),
                     f"{o.offer.source}, {o.offer.date}")
            for col, text in enumerate(cells):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.chart.addLegend(offset=(10, 5))
        if c.options:
            hours, owned, _ = break_even_curve(c, c.options[0])
            if priced:  # with electricity only, where it crosses a rented line is no break-even
                self.chart.plot(hours, owned, pen=pg.mkPen(self.theme.text, width=2), name="owned")
            for i, option in enumerate(c.options[:3]):
                _, _, rented = break_even_curve(c, option)
                self.chart.plot(hours, rented, pen=pg.mkPen(self.theme.series[i], width=2),
                                name=f"{option.offer.gpu_model} at {option.offer.provider}")
            self.marker = you_marker(c.busy_hours_month, self.theme)
            self.chart.addItem(self.marker)
        bigger = c.bigger_option
        # The hint above already says a price is missing (the shared note points here, to this page).
        notes = [n for n in c.notes if not n.startswith("No purchase price set")]
        if bigger is not None:
            notes.insert(0, f"For jobs this GPU cannot hold: {bigger.gpu_model} ({bigger.vram_gb:.0f} GB) at "
                            f"{bigger.provider}, ${bigger.on_demand_usd_h:.2f}/h on demand.")
        self.notes.setText("\n".join(notes))


def with_costs(settings: Any, costs: CostSettings) -> Any:
    """``settings`` with the Costs page's inputs (for the app's ``costs_changed`` handler)."""
    return replace(settings, costs=costs)
