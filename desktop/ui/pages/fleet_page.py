"""The Fleet page: every machine a Prometheus server scrapes, a card each, live every few seconds.

Off until Settings has a Prometheus URL (``[fleet] url``): until then the page says how to set one.
Each refresh reads the fleet on a worker thread (``Loader``: the 18 queries and the grouping never run
on the GUI thread) and hands a ``Fleet`` back; the cards are updated in place, in the reader's
attention order (the one ``rigscope fleet`` prints). A failed read (server down, 401, timeout) is one
line on the page, the last good reading stays shown. Click a card: the machine's plots over 1 h / 24 h /
7 d from ``query_range`` (the Dashboard's ``PlotColumn``) and its throttle lanes.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from advisor.safetext import printable
from desktop.config import FleetSettings
from desktop.fleet.client import Connection, FleetError, PrometheusClient
from desktop.fleet.connect import connection_from
from desktop.fleet.history import LANE_LABELS, LANE_TITLES, VIOLATION_LANES, WINDOWS_S, MachineHistory, read_history
from desktop.fleet.model import Fleet, FleetMachine
from desktop.fleet.reader import read_fleet
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.theme import Theme
from desktop.ui.widgets.fleet_cards import MachineCard
from desktop.ui.widgets.plot_column import PlotColumn

#: How often the page reads the fleet while it is shown (seconds).
REFRESH_S = 5.0
EMPTY_TEXT = ("No Prometheus server set. The Fleet page reads the machines a Prometheus server scrapes "
              "(rigscope record --prometheus on each machine, or dcgm-exporter). Set its URL under Settings › "
              "Fleet › Prometheus URL (url under [fleet] in settings.toml), e.g. http://prometheus:9090; "
              "credentials go in RIGSCOPE_FLEET_TOKEN, or RIGSCOPE_FLEET_USER and RIGSCOPE_FLEET_PASSWORD.")
#: The plots of a clicked machine: key, title, unit (the Dashboard's set).
PLOTS: tuple[tuple[str, str, str], ...] = (
    ("util", "GPU utilization", "%"), ("vram", "VRAM used", "MiB"), ("temp", "Temperature", "°C"),
    ("power", "Power", "W"), ("clock", "SM clock", "MHz"),
)

ClientFactory = Callable[[Connection], PrometheusClient]


@dataclass(frozen=True)
class _Failed:
    """A read that failed for a reason the user can act on (FleetError): its one line."""

    text: str


class FleetPage(PageWidget):
    def __init__(self, settings: Callable[[], FleetSettings], hot_c: Callable[[], float], theme: Theme, *,
                 client_factory: ClientFactory = PrometheusClient, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time, refresh_s: float = REFRESH_S,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.settings_source = settings
        self._hot_c = hot_c
        self._client_factory = client_factory
        self._environ = environ
        self.clock = clock
        self.fleet: Fleet | None = None
        self.cards: dict[str, MachineCard] = {}
        self._order: list[str] = []
        self.selected: str | None = None
        self.history: MachineHistory | None = None
        self.error = ""
        self.loader = Loader(self, name="fleet")
        self.history_loader = Loader(self, name="fleet-history")
        self.timer = QTimer(self)
        self.timer.setInterval(round(refresh_s * 1000))
        self.timer.timeout.connect(self.read_now)

        layout = QVBoxLayout(self)
        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setWordWrap(True)
        self.empty.setTextFormat(Qt.TextFormat.PlainText)
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.advice = QLabel()
        self.advice.setTextFormat(Qt.TextFormat.PlainText)
        self.advice.setWordWrap(True)
        self.advice.hide()
        layout.addWidget(self.empty)
        layout.addWidget(self.status)
        layout.addWidget(self.advice)

        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.cards_box = QWidget()
        self.cards_layout = QVBoxLayout(self.cards_box)
        self.cards_layout.setContentsMargins(0, 0, 4, 0)
        self.cards_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.cards_box)
        self.split.addWidget(scroll)
        self.split.addWidget(self._detail())
        self.split.setSizes([620, 780])
        layout.addWidget(self.split, 1)
        self.show_state()

    def _detail(self) -> QWidget:
        """The right side: the clicked machine's name, the window picker, its plots."""
        detail = QWidget()
        detail_layout = QVBoxLayout(detail)
        detail_layout.setContentsMargins(4, 0, 0, 0)
        top = QHBoxLayout()
        self.detail_title = QLabel("Click a machine for its plots.")
        self.detail_title.setTextFormat(Qt.TextFormat.PlainText)
        self.window_combo = QComboBox()
        self.window_combo.addItems(list(WINDOWS_S))
        self.window_combo.currentTextChanged.connect(lambda _text: self._read_history())
        top.addWidget(self.detail_title, 1)
        top.addWidget(QLabel("Window"))
        top.addWidget(self.window_combo)
        detail_layout.addLayout(top)
        #: Which colour is which GPU (the plots' hover readout says it too).
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        detail_layout.addWidget(self.legend)
        self.plots = self._new_plots()
        detail_layout.addWidget(self.plots, 1)
        self.detail_layout = detail_layout
        return detail

    # --- the Page protocol -----------------------------------------------------------
    def page_shown(self) -> None:
        self.show_state()
        if self.configured:
            self.read_now()
            self.timer.start()

    def page_hidden(self) -> None:
        self.timer.stop()

    def refresh(self) -> None:
        if self.configured and self.isVisible():
            self.read_now()

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        for card in self.cards.values():
            card.apply_theme(theme)
        self.plots.apply_theme(theme)
        self._paint_status()

    # --- reading ---------------------------------------------------------------------
    @property
    def configured(self) -> bool:
        return bool(self.settings_source().url.strip())

    @property
    def loading(self) -> bool:
        return self.loader.busy or self.history_loader.busy

    def _client(self) -> PrometheusClient:
        return self._client_factory(connection_from(self.settings_source(), environ=self._environ))

    def read_now(self) -> None:
        """Read the fleet on a worker thread, unless a read is still on its way (a slow server is not piled on)."""
        self.show_state()
        if not self.configured or self.loader.busy:
            return
        hot_c = self._hot_c()

        def work() -> Fleet | _Failed:
            try:
                with self._client() as client:
                    return read_fleet(client, hot_c=hot_c)
            except FleetError as exc:
                return _Failed(str(exc))

        self.loader.run(work, self._read_done, self._read_failed)

    def _read_done(self, result: Fleet | _Failed) -> None:
        if isinstance(result, _Failed):
            self._read_failed(result.text)
            return
        self.error = ""
        self.apply_fleet(result)

    def _read_failed(self, text: str) -> None:
        self.error = text.splitlines()[0] if text else "reading the fleet failed"
        self._paint_status()

    def apply_fleet(self, fleet: Fleet) -> None:
        """Show a reading: the GUI thread's whole share of a refresh (cards kept by name, texts set when changed)."""
        self.fleet = fleet
        now = self.clock()
        names = [m.name for m in fleet.machines]
        for machine in fleet.machines:
            card = self.cards.get(machine.name)
            if card is None:
                card = MachineCard(machine.name, self.theme)
                card.clicked.connect(self.select)
                self.cards[machine.name] = card
            card.update_from(machine, now)
        for gone in [n for n in self.cards if n not in set(names)]:
            card = self.cards.pop(gone)
            self.cards_layout.removeWidget(card)
            card.deleteLater()
        if names != self._order:  # re-laid out only when the attention order moved
            for name in names:
                self.cards_layout.removeWidget(self.cards[name])
            for position, name in enumerate(names):
                self.cards_layout.insertWidget(position, self.cards[name])
            self._order = names
        self._paint_status()

    def _paint_status(self) -> None:
        fleet = self.fleet
        if self.error:
            shown = "" if fleet is None else f" (showing the reading of {_clock_text(fleet.queried_at_s)})"
            self.status.setText(f"Reading the fleet failed: {self.error}{shown}")
            self.status.setStyleSheet(f"color: {self.theme.bad};")
            return
        self.status.setStyleSheet("")
        if fleet is None:
            self.status.setText("Reading the fleet…" if self.configured else "")
            return
        gpus = sum(len(m.gpus) for m in fleet.machines)
        dcgm = sum(1 for m in fleet.machines if m.source == "dcgm")
        self.status.setText(
            f"{len(fleet.machines)} machines, {gpus} GPUs ({dcgm} DCGM only) from {printable(fleet.server)} · "
            f"read at {_clock_text(fleet.queried_at_s)} · {fleet.requests} requests · "
            f"every {self.timer.interval() / 1000:g} s")

    def show_state(self) -> None:
        on = self.configured
        self.empty.setVisible(not on)
        self.split.setVisible(on)
        self.status.setVisible(on)

    # --- one machine's plots ---------------------------------------------------------
    def select(self, name: str) -> None:
        self.selected = name
        for card_name, card in self.cards.items():
            card.set_selected(card_name == name)
        self._read_history()

    def _machine(self, name: str) -> FleetMachine | None:
        return next((m for m in self.fleet.machines if m.name == name), None) if self.fleet else None

    def _read_history(self) -> None:
        name = self.selected
        machine = self._machine(name) if name is not None else None
        if name is None or machine is None:
            return
        window_s = WINDOWS_S[self.window_combo.currentText()]
        end_s = self.clock()
        dcgm_only = machine.source == "dcgm"
        self.detail_title.setText(f"{printable(name)}: reading {self.window_combo.currentText()}…")

        def work() -> MachineHistory | _Failed:
            try:
                with self._client() as client:
                    return read_history(client, name, window_s, end_s, dcgm_only=dcgm_only)
            except FleetError as exc:
                return _Failed(str(exc))

        self.history_loader.run(work, self.show_history, lambda text: self._history_failed(_Failed(text)))

    def _history_failed(self, failed: _Failed) -> None:
        self.detail_title.setText(f"{printable(self.selected or '')}: reading its plots failed: "
                                  f"{failed.text.splitlines()[0] if failed.text else ''}")

    def show_history(self, result: MachineHistory | _Failed) -> None:
        if isinstance(result, _Failed):
            self._history_failed(result)
            return
        self.history = result
        machine = self._machine(result.machine)
        window = next((k for k, v in WINDOWS_S.items() if v == result.window_s), "")
        self.detail_title.setText(f"{printable(result.machine)} over {window}"
                                  + (" (DCGM only: power and thermal violation counters as lanes)"
                                     if result.violation_lanes else ""))
        self.legend.setText(self._legend(machine))
        old = self.plots
        self.plots = self._new_plots(machine, result)
        self.detail_layout.replaceWidget(old, self.plots)
        old.deleteLater()
        self.plots.set_x_range(result.start_s, result.end_s)

    def _legend(self, machine: FleetMachine | None) -> str:
        if machine is None:
            return ""
        series = self.theme.series
        return "&nbsp;&nbsp;".join(
            f"<span style='color:{series[i % len(series)]}'>━━</span> "
            f"{html.escape(printable(' '.join(('GPU', g.index or g.uuid, g.model or ''))).strip())}"
            for i, g in enumerate(machine.gpus))

    def _new_plots(self, machine: FleetMachine | None = None, history: MachineHistory | None = None) -> PlotColumn:
        """A fresh column for one machine: a series per GPU in each plot, a lane row per throttle cause."""
        column = PlotColumn(self.theme)
        gpus = [g.uuid for g in machine.gpus] if machine is not None else []
        labels = {g.uuid: f"GPU {printable(g.index or g.uuid)}" for g in machine.gpus} if machine else {}
        lane_names = _lane_names(history)
        for key, title, unit in PLOTS:
            plot = column.add_plot(key, title, unit, y_range=(0, 100) if key == "util" else None)
            for i, gpu in enumerate(gpus):
                plot.add_series(gpu, labels[gpu], colour=self.theme.series[i % len(self.theme.series)])
                points = history.series.get(gpu, {}).get(key, []) if history else []
                plot.set_data(gpu, *_arrays(points))
        if machine is not None:
            for key, limit, text in (("power", max(_known(g.power_limit_w for g in machine.gpus), default=None),
                                      "power limit"),
                                     ("vram", max(_known(g.vram_total_mib for g in machine.gpus), default=None),
                                      "total"),
                                     ("temp", min(_known(g.slowdown_temperature_c for g in machine.gpus), default=None),
                                      "slowdown")):
                column.plot(key).set_limit(key, limit, text)
        lane = column.add_plot("lane", "Throttle causes (share of time)", "", height=70 + 18 * len(lane_names))
        for i, gpu in enumerate(gpus):
            for row, reason in enumerate(lane_names):
                key = f"{gpu}/{reason}"
                lane.add_series(key, f"{labels[gpu]} {reason}", colour=self.theme.series[i % len(self.theme.series)],
                                width=2, style="solid", downsample=False)
                times, shares = _arrays(history.lanes.get(gpu, {}).get(reason, []) if history else [])
                lane.set_data(key, times, row - 0.4 + 0.8 * shares)
        lane.set_categories([LANE_TITLES.get(name, name) for name in lane_names])
        return column


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _lane_names(history: MachineHistory | None) -> list[str]:
    """A DCGM-only machine's two violation counters; a Rigscope machine's throttle causes that held in the
    window (in the exporter's order), else the one row "none" (ten empty rows would leave no room for names)."""
    if history is not None and history.violation_lanes:
        return list(VIOLATION_LANES.values())
    held = {reason for lanes in (history.lanes.values() if history else ()) for reason, points in lanes.items()
            if any(share > 0 for _t, share in points)}
    return [label for label in LANE_LABELS if label in held] or ["none"]


def _arrays(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    if not points:
        return np.empty(0), np.empty(0)
    data = np.asarray(points, dtype=float)
    return data[:, 0], data[:, 1]


def _clock_text(time_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_s))
