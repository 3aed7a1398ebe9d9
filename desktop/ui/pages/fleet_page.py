"""The Fleet page: every machine a Prometheus server scrapes, a card each, live every few seconds.

Off until Settings has a Prometheus URL (``[fleet] url``): until then the page says how to set one.
Each refresh reads the fleet on a worker thread (``Loader``: the 19 queries and the grouping never run
on the GUI thread) and hands a ``Fleet`` back; the cards are updated in place, in the reader's
attention order (the one ``rigscope fleet`` prints). A failed read (server down, 401, timeout) is one
line on the page, the last good reading stays shown. Click a card: the machine's plots over 1 h / 24 h /
7 d from ``query_range`` (the Dashboard's ``PlotColumn``) and its throttle lanes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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
from desktop.fleet.advice import FleetAdvice
from desktop.fleet.client import Connection, FleetError, PrometheusClient
from desktop.fleet.connect import connection_from
from desktop.fleet.history import WINDOWS_S, MachineHistory, read_history
from desktop.fleet.model import Fleet, FleetMachine
from desktop.fleet.reader import read_fleet
from desktop.ui.background import Loader
from desktop.ui.pages.base import PageWidget
from desktop.ui.theme import Theme
from desktop.ui.widgets.fleet_cards import MachineCard
from desktop.ui.widgets.fleet_plots import legend_html, machine_plots

#: How often the page reads the fleet while it is shown (seconds).
REFRESH_S = 5.0
EMPTY_TEXT = ("No Prometheus server set. The Fleet page reads the machines a Prometheus server scrapes "
              "(rigscope record --prometheus on each machine, or dcgm-exporter). Set its URL under Settings › "
              "Fleet › Prometheus URL (url under [fleet] in settings.toml), e.g. http://prometheus:9090; "
              "credentials go in RIGSCOPE_FLEET_TOKEN, or RIGSCOPE_FLEET_USER and RIGSCOPE_FLEET_PASSWORD.")

ClientFactory = Callable[[Connection], PrometheusClient]
#: Reads the fleet's last 7 days and advises (desktop.fleet.advice); runs on a worker thread.
Advise = Callable[[PrometheusClient, Fleet], FleetAdvice]
#: How often the advice over 7 days is read again while the page is shown (seconds).
ADVICE_EVERY_S = 600.0


@dataclass(frozen=True)
class _Failed:
    """A read that failed for a reason the user can act on (FleetError): its one line."""

    text: str


class FleetPage(PageWidget):
    def __init__(self, settings: Callable[[], FleetSettings], hot_c: Callable[[], float], theme: Theme, *,
                 client_factory: ClientFactory = PrometheusClient, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time, refresh_s: float = REFRESH_S,
                 advise: Advise | None = None, parent: QWidget | None = None) -> None:
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
        self.advice_loader = Loader(self, name="fleet-advice")
        self._advise = advise
        self.fleet_advice: FleetAdvice | None = None
        #: When the advice was last asked for (the clock's time); None: not yet.
        self._advice_asked_s: float | None = None
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
        layout.addWidget(self.empty)
        layout.addWidget(self.status)
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self._cards_column())
        self.split.addWidget(self._detail())
        self.split.setSizes([620, 780])
        layout.addWidget(self.split, 1)
        self.show_state()

    def _cards_column(self) -> QWidget:
        """The left side: the cards, scrolled, and the 7-day advice under them."""
        self.advice = QLabel()
        self.advice.setTextFormat(Qt.TextFormat.PlainText)
        self.advice.setWordWrap(True)
        self.advice.hide()
        self.cards_box = QWidget()
        self.cards_layout = QVBoxLayout(self.cards_box)
        self.cards_layout.setContentsMargins(0, 0, 4, 0)
        self.cards_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.cards_box)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(scroll, 1)
        left_layout.addWidget(self.advice)
        return left

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
        self.plots = machine_plots(self.theme)
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
        return self.loader.busy or self.history_loader.busy or self.advice_loader.busy

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
        self._paint_status()  # before the first answer: "Reading the fleet…", not a blank line

    def _read_done(self, result: Fleet | _Failed) -> None:
        if isinstance(result, _Failed):
            self._read_failed(result.text)
            return
        self.error = ""
        self.apply_fleet(result)
        self._maybe_advise(result)

    def _maybe_advise(self, fleet: Fleet) -> None:
        """Read the 7-day advice after the first reading, then every ``ADVICE_EVERY_S`` (not every refresh)."""
        now = self.clock()
        if self._advise is None or self.advice_loader.busy or (
                self._advice_asked_s is not None and now - self._advice_asked_s < ADVICE_EVERY_S):
            return
        self._advice_asked_s = now
        advise = self._advise

        def work() -> FleetAdvice | _Failed:
            try:
                with self._client() as client:
                    return advise(client, fleet)
            except FleetError as exc:
                return _Failed(str(exc))

        self.advice_loader.run(work, self.show_advice, lambda text: self.show_advice(_Failed(text)))

    def show_advice(self, result: FleetAdvice | _Failed) -> None:
        if isinstance(result, _Failed):
            self.advice.setText(f"Fleet advice: reading the last 7 days failed: {result.text.splitlines()[0]}")
        else:
            self.fleet_advice = result
            lines = result.lines or ("Nothing to advise: no machine throttled or sat idle over the last 7 days.",)
            self.advice.setText("Over the last 7 days:\n" + "\n".join(f"• {printable(line)}" for line in lines))
        self.advice.show()

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
        self.legend.setText(legend_html(self.theme, machine))
        old = self.plots
        self.plots = machine_plots(self.theme, machine, result)
        self.detail_layout.replaceWidget(old, self.plots)
        old.deleteLater()
        self.plots.set_x_range(result.start_s, result.end_s)


def _clock_text(time_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_s))
