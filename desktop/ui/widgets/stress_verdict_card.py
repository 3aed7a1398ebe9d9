"""The Stress page's verdict card: what the last run said, or why there is none, and its exports.

Before a run in this session it shows the newest stored run ("Last run: …") or "No test run
yet"; while a test runs, what runs where; at the end, the verdict with its colour (passed,
throttled, errors…) and the comparison with earlier runs; or why a run did not start or end.
The export buttons turn on with the first verdict; exporting needs the run and its charts, so
the card only asks for it (``export_requested``) and the page writes the file.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from advisor.forecast_text import forecast_title
from advisor.frame import StressResult
from advisor.safetext import printable
from advisor.verdict import Verdict
from desktop.advice import gpu_meta_for, verdict_advice
from desktop.telemetry.model import GpuInfo
from desktop.ui.text import code_as_text
from desktop.ui.theme import Theme
from desktop.ui.widgets.stress_runs import NO_RUN_TITLE, last_run_card

#: The card's title for each verdict status (an unknown status is shown as it is).
TITLES: dict[str, str] = {
    "passed": "Passed: held its speed", "throttled": "Throttled", "errors": "Result errors found",
    "aborted": "Aborted", "no_data": "No verdict", "too_short": "Too short to judge",
    "inconclusive": "Inconclusive: still heating up"}
#: Said under NO_RUN_TITLE while nothing is stored and nothing has run.
NO_RUN_TEXT = "A run ends in a verdict: whether the GPU held its speed, and why not."


class VerdictCard(QFrame):
    """Title, sentence and comparison of the newest run, framed in its verdict's colour, with Export HTML/JSON."""

    export_requested = Signal(str)  # "html" | "json"

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        #: "idle" (no run this session: the newest stored one, or none), "running", "verdict",
        #: "message" (why a run did not start or end) or "unavailable" (no test can run here).
        self.state = "idle"
        self.setObjectName("verdictCard")
        card = QVBoxLayout(self)
        self.title = QLabel(NO_RUN_TITLE)
        self.title.setStyleSheet("font-weight: bold; font-size: 14pt;")
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.comparison = QLabel("")
        self.comparison.setWordWrap(True)
        #: What the temperature forecast rests on (the sentence says the forecast itself), hidden without one.
        self.forecast = QLabel("")
        self.forecast.setWordWrap(True)
        self.forecast.setTextFormat(Qt.TextFormat.PlainText)
        self.forecast.setVisible(False)
        #: A throttled run's action at once, with the evidence it rests on (the advisor's own texts).
        self.advice = QLabel("")
        self.advice.setWordWrap(True)
        self.advice.setTextFormat(Qt.TextFormat.PlainText)
        self.advice.setVisible(False)
        exports = QHBoxLayout()
        self.export_html_button = QPushButton("Export HTML…")
        self.export_json_button = QPushButton("Export JSON…")
        self.export_html_button.clicked.connect(lambda: self.export_requested.emit("html"))
        self.export_json_button.clicked.connect(lambda: self.export_requested.emit("json"))
        for button in (self.export_html_button, self.export_json_button):
            button.setEnabled(False)
            exports.addWidget(button)
        exports.addStretch(1)
        for widget in (self.title, self.text, self.forecast, self.comparison, self.advice):
            card.addWidget(widget)
        card.addLayout(exports)
        self.paint(None)

    def show_idle(self, newest: StressResult | None) -> None:
        """Before a run in this session: the newest stored run, or "No test run yet" when there is none."""
        if self.state != "idle":
            return
        title, text = last_run_card(newest) if newest is not None else (NO_RUN_TITLE, NO_RUN_TEXT)
        self.title.setText(title)
        self.text.setText(text)

    def show_running(self, what: str) -> None:
        """A test has started: ``what`` says which workload runs where, and for how long."""
        self.state = "running"
        self.title.setText("Running…")
        self.text.setText(what)
        self.comparison.setText("")
        self.advice.setVisible(False)
        self.forecast.setVisible(False)
        self.paint(None)

    def show_verdict(self, verdict: Verdict, power_limit_line: str | None = None, gpu: GpuInfo | None = None) -> None:
        """The verdict; ``power_limit_line`` (the run's envelope: "capped at 56 W of 175 W: on battery") under it;
        a throttled run's action for ``gpu`` below (a laptop gets the firmware's mode, never ``-pl``)."""
        self.state = "verdict"
        meta = gpu_meta_for(gpu.name if gpu else None, gpu.index if gpu else 0,
                            is_laptop=gpu.is_laptop if gpu else None,
                            power_limit_settable=gpu.power_limit_settable if gpu else None,
                            power_limit_w=gpu.power_limit_enforced_w if gpu else None)
        advice = verdict_advice(verdict, meta)
        self.advice.setText(f"What to do: {code_as_text(advice.action)}\nEvidence: {advice.evidence}."
                            if advice else "")
        self.advice.setVisible(advice is not None)
        self.title.setText(forecast_title(verdict) or TITLES.get(verdict.status, verdict.status))
        line = f"\nPower limit: {printable(power_limit_line)}." if power_limit_line else ""
        self.text.setText(verdict.sentence + line)
        self.forecast.setText(f"Forecast (not a measurement): {verdict.forecast.basis}." if verdict.forecast else "")
        self.forecast.setVisible(verdict.forecast is not None and verdict.forecast.basis != ""
                                 and forecast_title(verdict) is not None)
        self.comparison.setText(verdict.comparison[:1].upper() + verdict.comparison[1:] if verdict.comparison
                                else "")
        self.paint(verdict)
        for button in (self.export_html_button, self.export_json_button):
            button.setEnabled(True)

    def show_message(self, title: str, text: str) -> None:
        """Why a run did not start or end."""
        self.state = "message"
        self.advice.setVisible(False)
        self.forecast.setVisible(False)
        self.title.setText(title)
        self.text.setText(text)

    def show_unavailable(self, message: str) -> None:
        """No test can run here (e.g. PyTorch is missing)."""
        self.state = "unavailable"
        self.title.setText("Stress test unavailable")
        self.text.setText(message)

    def paint(self, verdict: Verdict | None) -> None:
        """Frame the card in the verdict's colour (muted without one)."""
        colour = self.theme.muted
        if verdict is not None:
            colour = {"passed": self.theme.ok, "throttled": self.theme.warn, "inconclusive": self.theme.muted,
                      "too_short": self.theme.muted}.get(verdict.status, self.theme.bad)
        self.setStyleSheet(f"#verdictCard {{ border: 1px solid {colour}; border-left: 6px solid {colour};"
                           f" border-radius: 3px; }}")

    def apply_theme(self, theme: Theme, verdict: Verdict | None) -> None:
        self.theme = theme
        self.paint(verdict)
