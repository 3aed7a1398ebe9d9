"""The Stress page's "Compare modes": the Quick test once per firmware mode, one run after the other.

The page runs each test as usual (live charts, verdict, saved in the history); this controller
switches the mode before each run (the simulated laptop itself; a real laptop only where
`SysfsModes` may write, else it asks the user to switch), and after the last one writes the
comparison into the verdict card: one sentence per neighbouring pair (advisor/mode_compare.py) and
each mode's sustained throughput, power, temperature and SM clock. Unlike `rigscope stress
--per-mode` the runs follow each other without a cool-down. As there, the mode found before the
first switch is put back when the comparison ends, is cancelled or stops on a refused run, and the
card says so ("restored firmware mode Balanced", or the command that restores it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QMessageBox, QPushButton

from advisor.mode_compare import mode_sentences
from advisor.safetext import printable
from advisor.verdict import Verdict
from desktop.errors import UserError
from desktop.stress.mode_restore import ModeKeeper
from desktop.stress.per_mode import ModeRun, ModeSwitch, mode_name
from desktop.stress.portable import record_from_stress
from desktop.ui.pages.stress_page import StressPage

log = logging.getLogger(__name__)

#: The Quick preset's place among the page's presets ("Quick 2 min").
QUICK_PRESET = 0


def _ask_user(page: StressPage, text: str) -> bool:
    box = QMessageBox(QMessageBox.Icon.Information, "Switch the firmware mode", text,
                      QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, page)
    return box.exec() == QMessageBox.StandardButton.Ok


class ModeCompare(QObject):
    """Adds "Compare modes ▾" to ``page``: pick the modes, then one Quick test in each."""

    def __init__(self, page: StressPage, switch: ModeSwitch, *,
                 ask: Callable[[str], bool] | None = None) -> None:
        super().__init__(page)
        self.page = page
        self.switch = switch
        self.ask = ask or (lambda text: _ask_user(page, text))
        self.button = QPushButton("Compare &modes ▾")
        self.button.setToolTip("Run the Quick test once in each checked firmware mode and compare throughput, "
                               "power, temperature and clock")
        self.menu = QMenu(self.button)
        self.mode_actions: dict[str, QAction] = {}
        for mode in switch.available():
            action = self.menu.addAction(mode_name(switch.kind, mode))
            action.setCheckable(True)
            action.setChecked(True)
            self.mode_actions[mode] = action
        self.menu.addSeparator()
        self.run_action = self.menu.addAction("Run the Quick test in each checked mode")
        self.run_action.triggered.connect(self.start)
        self.button.setMenu(self.menu)
        page.add_control(self.button)
        page.finished.connect(self._on_finished)
        self.queue: list[str] = []
        self.runs: list[ModeRun] = []
        #: The mode of the run in progress (None: no comparison runs).
        self.current: tuple[str, str] | None = None
        #: The mode found at the start, put back at the end (None: no comparison runs).
        self.keeper: ModeKeeper | None = None
        #: What putting it back said, shown in the card.
        self.restore_lines: list[str] = []

    @property
    def active(self) -> bool:
        return self.current is not None

    def start(self) -> None:
        if self.page.running or self.active:
            return
        modes = [m for m, action in self.mode_actions.items() if action.isChecked()]
        if len(modes) < 2:
            self.page.verdict_card.show_message("Compare modes", "Check at least two modes to compare.")
            return
        self.restore_lines = []
        keeper = ModeKeeper(self.switch, say=self.restore_lines.append)
        try:
            keeper.remember()
        except UserError as exc:  # another comparison or `stress --per-mode` switches modes now
            keeper.close()
            self.page.verdict_card.show_message("Compare modes", str(exc))
            return
        self.keeper = keeper
        self.queue, self.runs = modes, []
        self._next()

    def _next(self) -> None:
        mode = self.queue.pop(0)
        name = mode_name(self.switch.kind, mode)
        if not self.switch.set(mode) and not self.ask(
                f"Switch the firmware to {name} ({self.switch.kind} {mode}), then press OK."):
            self._stop("Mode comparison cancelled.")
            return
        actual = self.switch.current() or mode
        self.current = (actual, mode_name(self.switch.kind, actual))
        self.page.presets.button(QUICK_PRESET).setChecked(True)
        self.page.start()
        if not self.page.running:  # refused to start (the page says why)
            self._stop(None)

    def _on_finished(self, verdict: Verdict) -> None:
        if self.current is None or self.page.result is None:
            return
        mode, name = self.current
        result = self.page.result
        self.runs.append(ModeRun(mode, name, result, verdict, record_from_stress(result, verdict, machine=name)))
        if result.aborted or not self.queue:
            self._show()
            return
        QTimer.singleShot(0, self._next)

    def _put_back(self) -> list[str]:
        """Restore the mode found (once) and give what was said about it."""
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            try:
                keeper.restore()
            finally:
                keeper.close()
        return [line[0].upper() + line[1:] + "." for line in self.restore_lines]

    def shutdown(self) -> None:
        """The window quits: a comparison under way ends here and the mode found is put back."""
        self.current, self.queue = None, []
        for line in self._put_back():  # no card to show it in any more
            log.warning("%s", printable(line))

    def _stop(self, message: str | None) -> None:
        self.current, self.queue = None, []
        said = self._put_back()
        if message:
            self.page.verdict_card.show_message("Compare modes", printable(" ".join([message, *said])))
        elif said:  # the page says why the run did not start; the mode put back goes below it
            self.page.verdict_card.comparison.setText(printable(" ".join(said)))

    def _show(self) -> None:
        self.current, self.queue = None, []
        said = self._put_back()
        lines = [s + "." for s in mode_sentences([r.figures() for r in self.runs])]
        for run in self.runs:
            f = run.figures()
            parts = [f"{f.throughput:.3g} {f.unit or ''}".strip() if f.throughput is not None else "no throughput"]
            parts += [f"{value:.0f} {unit}" for value, unit in ((f.power_w, "W"), (f.temperature_c, "°C"),
                                                               (f.sm_clock_mhz, "MHz")) if value is not None]
            lines.append(f"{f.name}: {', '.join(parts)}")
        lines += said
        self.page.verdict_card.comparison.setText(printable("\n".join(lines), keep_newlines=True))
