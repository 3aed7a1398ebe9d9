"""The Advisor page: recommendations as cards, most severe first, each with its evidence, a chart and the action.

Dismissed and snoozed recommendations are remembered in ``advisor-state.json`` in the config
folder (``AdviceState``). Wiring (app.py)::

    source = HistorySource(db_path, settings)  # desktop.reporting
    window.add_page("advisor", "Advisor", AdvisorPage(source.advice, AdviceState.default(), theme))
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from advisor.rules import Recommendation
from advisor.wording import count_text
from desktop.advice import Advice, gpu_of, span_text
from desktop.paths import config_dir
from desktop.ui.pages.advice_page import AdvicePage, AdviceSource, plain_label
from desktop.ui.text import code_as_text, plain_tooltip
from desktop.ui.theme import DARK, Theme
from desktop.ui.widgets.plot_column import TimeAxis

SNOOZE_DAYS = 7.0
_CHART_LABELS = {"temperature_c": "°C", "vram_used_mib": "VRAM (MiB)", "utilization_gpu_pct": "GPU %",
                 "power_w": "power (W)", "pcie_gen": "PCIe gen", "effective_load_pct": "effective load %"}


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
        gpu = gpu_of(advice.frame, rec)
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
        colour = theme.severity(rec.severity)
        self.setObjectName("card")
        # The rule id names the rule for an issue report, not for reading: a tooltip, not a label.
        self.setToolTip(plain_tooltip(f"Rule: {rec.rule_id}"))
        self.setStyleSheet(f"QFrame#card {{ border: 1px solid {theme.muted}; border-left: 5px solid {colour};"
                           f" border-radius: 4px; }}")
        layout = QVBoxLayout(self)
        head = QHBoxLayout()
        badge = plain_label(rec.severity.upper(), wrap=False, bold=True)
        badge.setStyleSheet(f"color: {colour};")
        head.addWidget(badge)
        self.title = plain_label(code_as_text(rec.title), bold=True)
        head.addWidget(self.title, 1)
        self.dismiss_button = QPushButton("Restore" if hidden else "Dismiss")
        self.snooze_button = QPushButton(f"Snooze {SNOOZE_DAYS:.0f} days")
        self.snooze_button.setVisible(not hidden)
        head.addWidget(self.snooze_button)
        head.addWidget(self.dismiss_button)
        layout.addLayout(head)
        body = QHBoxLayout()
        self.evidence = plain_label("\n".join(f"• {code_as_text(e.text())}" for e in rec.evidence))
        body.addWidget(self.evidence, 1)
        self.chart = self._chart(advice, theme)
        if self.chart is not None:
            body.addWidget(self.chart, 1)
        layout.addLayout(body)
        self.action = plain_label(f"Action: {code_as_text(rec.action)}")
        layout.addWidget(self.action)

    def _chart(self, advice: Advice, theme: Theme) -> pg.PlotWidget | None:
        gpu = gpu_of(advice.frame, self.rec)
        metric = self.rec.chart_metric
        if gpu is None or metric is None or len(gpu) == 0:
            return None
        values = np.asarray(getattr(gpu, metric), dtype=np.float64)
        step = max(1, len(gpu) // 2000)  # a glance, not an analysis: ~2,000 points is plenty
        plot = pg.PlotWidget(axisItems={"bottom": TimeAxis()})  # weekdays on a week: "Mon 09"
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


class AdvisorPage(AdvicePage):
    """Recommendation cards, most severe first; dismissed and snoozed ones hidden unless asked for."""

    LOADING_TEXT = "Reading the history and working out the advice..."

    def __init__(self, source: AdviceSource, state: AdviceState, theme: Theme = DARK) -> None:
        super().__init__(source)
        self.state = state
        self.theme = theme
        self.cards: list[RecommendationCard] = []
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.header = plain_label("No advice loaded yet.")
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
        judged = span_text(advice.recorded_s)
        shown = len(advice.recommendations) - (0 if show_hidden else hidden_count)
        text = (f"{count_text(shown, 'recommendation')} from {judged} of recorded history"
                + (f" ({hidden_count} dismissed or snoozed)" if hidden_count else "")
                + ("  [demo data: a simulated week]" if advice.frame.demo else ""))
        shortfall = advice.shortfall()
        if shortfall is not None:  # too little load to judge: say so rather than "nothing to improve"
            text = shortfall + (f" {text}." if advice.recommendations else "")
        elif not advice.recommendations:
            text = f"Nothing to improve in {judged} of recorded history: no rule crossed its threshold."
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
