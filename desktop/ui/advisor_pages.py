"""The Advisor, Costs and History pages: recommendations as cards, own-vs-rent, and weekly summaries.

Each page gets its data from a callable passed in (``HistorySource`` reads the history database;
tests pass frames built in memory), so no page opens a database or reads settings by itself.
Dismissed and snoozed recommendations are remembered in ``advisor-state.json`` in the config
folder. Text that comes from the machine (process names) is shown as plain text, never as rich text.

Wiring (app.py)::

    from desktop.ui.advisor_history import HistoryPage, HistorySource
    source = HistorySource(db_path, settings)
    window.add_page("advisor", "Advisor", AdvisorPage(source.advice, AdviceState.default(), theme))
    window.add_page("costs", "Costs", CostsPage(source.advice, settings.costs, theme))
    window.add_page("history", "History", HistoryPage(source.weeks, source.report))

(``HistoryPage`` and ``HistorySource`` live in ``desktop.ui.advisor_history``.)
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from advisor.costs import CostComparison, CostInputs, break_even_curve, compare
from advisor.rules import Recommendation
from desktop.advice import Advice, load_cloud_offers, load_gpu_specs, usage_of
from desktop.config import CostSettings
from desktop.paths import config_dir
from desktop.ui.background import Loader
from desktop.ui.theme import DARK, Theme

SNOOZE_DAYS = 7.0
SEVERITY_COLOURS = {"critical": "#D55E00", "warning": "#E69F00", "info": "#56B4E9"}
AdviceSource = Callable[[], Advice | None]
_CHART_LABELS = {"temperature_c": "°C", "vram_used_mib": "VRAM (MiB)", "utilization_gpu_pct": "GPU %",
                 "power_w": "power (W)", "pcie_gen": "PCIe gen"}


def _plain(text: str, *, wrap: bool = True, bold: bool = False) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a process may be named "<b>..."
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if bold:
        font = label.font()
        font.setBold(True)
        label.setFont(font)
    return label


class AdviceState:
    """Which recommendations the user dismissed (for good) or snoozed (until a time)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._data: dict[str, dict[str, float]] = {"dismissed": {}, "snoozed": {}}
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            for kind in ("dismissed", "snoozed"):
                self._data[kind] = {str(k): float(v) for k, v in dict(loaded.get(kind, {})).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # no file yet, or a damaged one: start empty rather than refuse to show advice

    @classmethod
    def default(cls) -> AdviceState:
        return cls(config_dir() / "advisor-state.json")

    @staticmethod
    def key(rec: Recommendation, advice: Advice) -> str:
        gpu = advice.frame.gpu(rec.gpu_index) if rec.gpu_index is not None else None
        return f"{rec.rule_id}:{gpu.meta.uuid if gpu is not None else '-'}"

    def hidden(self, key: str) -> bool:
        return key in self._data["dismissed"] or self._data["snoozed"].get(key, 0.0) > self.clock()

    def dismiss(self, key: str) -> None:
        self._data["dismissed"][key] = self.clock()
        self._save()

    def snooze(self, key: str, days: float = SNOOZE_DAYS) -> None:
        self._data["snoozed"][key] = self.clock() + days * 86400.0
        self._save()

    def restore(self, key: str) -> None:
        self._data["dismissed"].pop(key, None)
        self._data["snoozed"].pop(key, None)
        self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".advisor-", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(self._data, handle, indent=1)
        os.replace(tmp, self.path)


class RecommendationCard(QFrame):
    """One recommendation: severity, title, evidence, a small chart of the evidence, the action."""

    def __init__(self, rec: Recommendation, advice: Advice, hidden: bool, theme: Theme) -> None:
        super().__init__()
        self.rec = rec
        colour = SEVERITY_COLOURS.get(rec.severity, theme.muted)
        self.setObjectName("card")
        self.setStyleSheet(f"QFrame#card {{ border: 1px solid {theme.muted}; border-left: 5px solid {colour};"
                           f" border-radius: 4px; }}")
        layout = QVBoxLayout(self)
        head = QHBoxLayout()
        badge = _plain(rec.severity.upper(), wrap=False, bold=True)
        badge.setStyleSheet(f"color: {colour};")
        head.addWidget(badge)
        self.title = _plain(rec.title, bold=True)
        head.addWidget(self.title, 1)
        head.addWidget(_plain(rec.rule_id, wrap=False))
        self.dismiss_button = QPushButton("Restore" if hidden else "Dismiss")
        self.snooze_button = QPushButton(f"Snooze {SNOOZE_DAYS:.0f} days")
        self.snooze_button.setVisible(not hidden)
        head.addWidget(self.snooze_button)
        head.addWidget(self.dismiss_button)
        layout.addLayout(head)
        body = QHBoxLayout()
        self.evidence = _plain("\n".join(f"• {e.text()}" for e in rec.evidence))
        body.addWidget(self.evidence, 1)
        self.chart = self._chart(advice, theme)
        if self.chart is not None:
            body.addWidget(self.chart, 1)
        layout.addLayout(body)
        self.action = _plain(f"Action: {rec.action}")
        layout.addWidget(self.action)

    def _chart(self, advice: Advice, theme: Theme) -> pg.PlotWidget | None:
        gpu = advice.frame.gpu(self.rec.gpu_index) if self.rec.gpu_index is not None else None
        metric = self.rec.chart_metric
        if gpu is None or metric is None or len(gpu) == 0:
            return None
        values = np.asarray(getattr(gpu, metric), dtype=np.float64)
        step = max(1, len(gpu) // 2000)  # a glance, not an analysis: ~2,000 points is plenty
        plot = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem()})
        plot.setBackground(theme.plot_background)
        plot.setFixedHeight(130)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.plot(gpu.time_s[::step], values[::step], pen=pg.mkPen(theme.series[0], width=1), connect="finite")
        for start, end in self.rec.time_ranges:
            region = pg.LinearRegionItem((start, end), movable=False, brush=pg.mkBrush(230, 159, 0, 60))
            plot.addItem(region)
        plot.setLabel("left", _CHART_LABELS.get(metric, metric))
        return plot


class _AdvicePage(QWidget):
    """A page drawn from the advice, read on a worker thread when first shown or refreshed."""

    LOADING_TEXT = "Reading the history..."

    def __init__(self, source: AdviceSource) -> None:
        super().__init__()
        self.source = source
        self.advice: Advice | None = None
        self.loader = Loader(self)

    @property
    def loading(self) -> bool:
        return self.loader.busy

    def page_shown(self) -> None:
        if self.advice is None and not self.loading:
            self.refresh()

    def refresh(self) -> None:
        """Read the history and compute the advice on a worker thread; ``set_advice`` follows here."""
        self.loading_changed(True)
        self.show_status(self.LOADING_TEXT)
        self.loader.run(self.source, self._loaded, self._failed)

    def _loaded(self, advice: Advice | None) -> None:
        self.loading_changed(False)
        self.set_advice(advice)

    def _failed(self, error: str) -> None:
        self.loading_changed(False)
        self.show_status(f"Could not read the history: {error}")

    def loading_changed(self, loading: bool) -> None:
        """Called as a read starts and ends (e.g. to disable a Refresh button meanwhile)."""

    def show_status(self, text: str) -> None:
        raise NotImplementedError

    def set_advice(self, advice: Advice | None) -> None:
        raise NotImplementedError


class AdvisorPage(_AdvicePage):
    """Recommendation cards, most severe first; dismissed and snoozed ones hidden unless asked for."""

    LOADING_TEXT = "Reading the history and working out the advice..."

    def __init__(self, source: AdviceSource, state: AdviceState, theme: Theme = DARK) -> None:
        super().__init__(source)
        self.state = state
        self.theme = theme
        self.cards: list[RecommendationCard] = []
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.header = _plain("No advice loaded yet.")
        top.addWidget(self.header, 1)
        self.show_hidden = QCheckBox("Show dismissed and snoozed")
        self.show_hidden.toggled.connect(lambda _: self._rebuild())
        top.addWidget(self.show_hidden)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        top.addWidget(self.refresh_button)
        layout.addLayout(top)
        self._list = QWidget()
        self._list_layout = QVBoxLayout(self._list)
        self._list_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self._list)
        layout.addWidget(scroll, 1)

    def show_status(self, text: str) -> None:
        self.header.setText(text)

    def loading_changed(self, loading: bool) -> None:
        self.refresh_button.setEnabled(not loading)

    def set_advice(self, advice: Advice | None) -> None:
        self.advice = advice
        self._rebuild()

    def apply_theme(self, theme: Theme) -> None:
        """Rebuild the cards in the new theme's colours."""
        self.theme = theme
        if self.advice is not None:
            self._rebuild()

    def _rebuild(self) -> None:
        for card in self.cards:
            card.setParent(None)
            card.deleteLater()
        self.cards = []
        advice = self.advice
        if advice is None:
            self.header.setText("No history to advise on yet: record some, or open the demo history.")
            return
        show_hidden = self.show_hidden.isChecked()
        hidden_count = 0
        for rec in advice.recommendations:
            key = AdviceState.key(rec, advice)
            hidden = self.state.hidden(key)
            hidden_count += hidden
            if hidden and not show_hidden:
                continue
            card = RecommendationCard(rec, advice, hidden, self.theme)
            card.dismiss_button.clicked.connect(lambda _=False, k=key, h=hidden: self._dismiss(k, h))
            card.snooze_button.clicked.connect(lambda _=False, k=key: self._snooze(k))
            self._list_layout.insertWidget(self._list_layout.count() - 1, card)
            self.cards.append(card)
        days = (advice.frame.end_s - advice.frame.start_s) / 86400.0
        shown = len(advice.recommendations) - (0 if show_hidden else hidden_count)
        text = (f"{shown} recommendation(s) from the last {days:.0f} days of history"
                + (f" ({hidden_count} dismissed or snoozed)" if hidden_count else "")
                + ("  [demo data: a simulated week]" if advice.frame.demo else ""))
        if not advice.recommendations:
            text = f"Nothing to improve in the last {days:.0f} days: no rule crossed its threshold."
        self.header.setText(text)

    def _dismiss(self, key: str, hidden: bool) -> None:
        if hidden:
            self.state.restore(key)
        else:
            self.state.dismiss(key)
        self._rebuild()

    def _snooze(self, key: str) -> None:
        self.state.snooze(key)
        self._rebuild()


class CostsPage(_AdvicePage):
    """Own vs rent: inputs, the comparison table and the break-even chart, recomputed as inputs change."""

    LOADING_TEXT = "Reading the busy hours and energy from the history..."

    costs_changed = Signal(object)  # CostSettings, for the app to save

    HEADERS = ("cloud GPU", "provider", "speed", "hours/month", "on demand/month", "spot/month",
               "break-even busy h/month", "price source")

    def __init__(self, source: AdviceSource, costs: CostSettings, theme: Theme = DARK,
                 offers: list[Any] | None = None, specs: list[Any] | None = None) -> None:
        super().__init__(source)
        self.theme = theme
        self.offers = load_cloud_offers() if offers is None else offers
        self.specs = load_gpu_specs() if specs is None else specs
        self.comparison: CostComparison | None = None
        self.currency = costs.currency
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.gpu_combo = QComboBox()
        self.price = QDoubleSpinBox(maximum=10_000_000.0, decimals=0, singleStep=100.0, value=costs.purchase_price)
        self.months = QSpinBox(minimum=1, maximum=240, value=costs.amortisation_months)
        self.kwh_price = QDoubleSpinBox(maximum=10.0, decimals=3, singleStep=0.01,
                                        value=costs.electricity_price_per_kwh)
        form.addRow("GPU", self.gpu_combo)
        form.addRow(f"Purchase price ({costs.currency})", self.price)
        form.addRow("Amortisation (months)", self.months)
        form.addRow(f"Electricity ({costs.currency}/kWh)", self.kwh_price)
        layout.addLayout(form)
        self.summary = _plain("")
        layout.addWidget(self.summary)
        self.table = QTableWidget(0, len(self.HEADERS))
        self.table.setHorizontalHeaderLabels(list(self.HEADERS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        self.chart = pg.PlotWidget()
        self.chart.setBackground(theme.plot_background)
        self.chart.setLabel("bottom", "busy hours per month")
        self.chart.setLabel("left", f"cost per month ({costs.currency} / USD)")
        self.chart.addLegend(offset=(10, 5))
        self.chart.setMinimumHeight(240)
        layout.addWidget(self.chart, 1)
        self.notes = _plain("")
        layout.addWidget(self.notes)
        for box in (self.price, self.months, self.kwh_price):
            box.valueChanged.connect(self._inputs_changed)
        self.gpu_combo.currentIndexChanged.connect(lambda _: self.recompute())

    def show_status(self, text: str) -> None:
        self.summary.setText(text)

    def set_advice(self, advice: Advice | None) -> None:
        self.advice = advice
        self.gpu_combo.blockSignals(True)
        self.gpu_combo.clear()
        for gpu in advice.frame.gpus if advice else ():
            self.gpu_combo.addItem(f"GPU {gpu.meta.index}: {gpu.meta.name}", gpu.meta.index)
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
        index = self.gpu_combo.currentData()
        gpu = advice.frame.gpu(int(index)) if advice is not None and index is not None else None
        self.table.setRowCount(0)
        self.chart.clear()
        if advice is None or gpu is None:
            self.summary.setText("No history yet: costs are computed from the hours your GPU was busy.")
            self.comparison = None
            return
        s = self.settings()
        inputs = CostInputs(s.purchase_price, s.amortisation_months, s.electricity_price_per_kwh, s.currency)
        c = compare(gpu.meta.name, gpu.meta.vram_total_mib, usage_of(advice.frame, gpu.meta.index), inputs,
                    offers=self.offers, specs=self.specs)
        self.comparison = c
        self.summary.setText(
            f"{c.busy_hours_month:.0f} busy hours/month and {c.energy_kwh_month:.1f} kWh/month measured. Owned: "
            f"{c.owned_month:,.2f} {s.currency}/month (amortisation {c.owned_fixed_month:,.2f} + electricity "
            f"{c.owned_energy_month:,.2f}).")
        for o in c.options:
            row = self.table.rowCount()
            self.table.insertRow(row)
            cells = (o.offer.gpu_model, o.offer.provider, f"{o.relative_speed:.2f}x", f"{o.cloud_hours_month:.1f}",
                     f"{o.on_demand_month:,.2f}", f"{o.spot_month:,.2f}" if o.spot_month is not None else "-",
                     f"{o.break_even_busy_hours_month:.0f}" if o.break_even_busy_hours_month is not None else "never",
                     f"{o.offer.source}, {o.offer.date}")
            for col, text in enumerate(cells):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.chart.addLegend(offset=(10, 5))
        if c.options:
            hours, owned, _ = break_even_curve(c, c.options[0])
            self.chart.plot(hours, owned, pen=pg.mkPen(self.theme.text, width=2), name="owned")
            for i, option in enumerate(c.options[:3]):
                _, _, rented = break_even_curve(c, option)
                self.chart.plot(hours, rented, pen=pg.mkPen(self.theme.series[i], width=2),
                                name=f"{option.offer.gpu_model} at {option.offer.provider}")
            self.chart.addItem(pg.InfiniteLine(c.busy_hours_month, angle=90, label="you",
                                               pen=pg.mkPen(self.theme.muted, style=Qt.PenStyle.DashLine)))
        bigger = c.bigger_option
        notes = list(c.notes)
        if bigger is not None:
            notes.insert(0, f"For jobs this GPU cannot hold: {bigger.gpu_model} ({bigger.vram_gb:.0f} GB) at "
                            f"{bigger.provider}, ${bigger.on_demand_usd_h:.2f}/h on demand.")
        self.notes.setText("\n".join(notes))


def with_costs(settings: Any, costs: CostSettings) -> Any:
    """``settings`` with the Costs page's inputs (for the app's ``costs_changed`` handler)."""
    return replace(settings, costs=costs)
