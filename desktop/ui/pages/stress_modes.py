"""The Stress page's "Compare modes": the Quick test once per firmware mode, one run after the other.

The page runs each test as usual (live charts, verdict, saved in the history); this controller
switches the mode before each run (the simulated laptop itself; a real laptop only where
`SysfsModes` may write, else it asks the user to switch), and after the last one writes the
comparison into the verdict card: one sentence per neighbouring pair (advisor/mode_compare.py) and
each mode's sustained throughput, power, temperature and SM clock. The steps are `rigscope stress
--per-mode`'s (``per_mode.ModeSteps``, what its ``run_modes`` loops over), one per callback: switch
(or ask), cool down (``cool_to_start``, on a worker: the GPU back near the first run's start
temperature before the next mode, where ``read_temperature`` is given), run on the page, record.
As there, the mode found before the first switch is put back when the comparison ends, is cancelled
or stops on a refused run, and the card says so ("restored firmware mode Balanced", or the command
that restores it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QMessageBox, QPushButton

from advisor.mode_compare import mode_sentences
from advisor.safetext import printable
from desktop.errors import UserError
from desktop.stress.mode_restore import ModeKeeper
from desktop.stress.per_mode import ModeRun, ModeSteps, ModeSwitch, cool_to_start, mode_name
from desktop.stress.run_model import Clock, RealClock, RunResult
from desktop.ui.background import Loader
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.stress_work import FinishedRun

log = logging.getLogger(__name__)

#: The Quick preset's place among the page's presets ("Quick 2 min").
QUICK_PRESET = 0


def _ask_user(page: StressPage, text: str) -> bool:
    box = QMessageBox(QMessageBox.Icon.Information, "Switch the firmware mode", text,
                      QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, page)
    return box.exec() == QMessageBox.StandardButton.Ok


class _Judged:
    """A run the page judged, as ``ModeSteps.add`` takes it (the session's outcome, in the page's terms)."""

    def __init__(self, result: RunResult, done: FinishedRun) -> None:
        self.result, self.verdict = result, done.verdict
        self.run_id = done.run_id
        self.save_error: str | None = done.save_error or None


class ModeCompare(QObject):
    """Adds "Compare modes ▾" to ``page``: pick the modes, then one Quick test in each.

    ``read_temperature(nvml_index)`` (called on a worker thread) and ``clock``: the GPU's temperature for the
    cool-down between modes (None: no cool-down)."""

    def __init__(self, page: StressPage, switch: ModeSwitch, *,
                 ask: Callable[[str], bool] | None = None,
                 read_temperature: Callable[[int], float | None] | None = None, clock: Clock | None = None) -> None:
        super().__init__(page)
        self.page = page
        self.switch = switch
        self.ask = ask or (lambda text: _ask_user(page, text))
        self.read_temperature = read_temperature
        self.clock: Clock = clock or RealClock()
        #: Waits for the GPU to cool between modes, off the GUI thread.
        self.cooling = Loader(self, name="mode-cool-down")
        #: Set when the comparison ends early (quit): the cool-down stops waiting.
        self._stop = threading.Event()
        self.steps: ModeSteps | None = None
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
        page.controls.add_control(self.button)
        page.judged.connect(self._on_judged)
        page.cancelled.connect(self._on_cancel)
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
        self.runs = []
        self._stop = threading.Event()
        cool = None
        read, index = self.read_temperature, self.page.controls.selected_gpu()
        if read is not None:  # the start temperature of the GPU compared, read before the first switch
            cool = cool_to_start(lambda: read(index), self.clock, self._stop)
        self.steps = ModeSteps(modes, self.switch, ask=self.ask, cool_down=cool, stop=self._stop,
                               prompt="Switch the firmware to {name} ({kind} {mode}), then press OK.")
        self._next()

    def _next(self) -> None:
        """The next mode: switched (or asked for), then the cool-down on a worker, then its run on the page."""
        steps = self.steps
        if steps is None:
            return
        mode = steps.switch_next()
        if mode is None:
            if steps.declined:
                self._stop_with("Mode comparison cancelled.")
            else:
                self._show()
            return
        self.current = (mode, mode_name(self.switch.kind, mode))
        if not steps.cooling_due:  # the first mode: nothing to wait for, it starts at once
            if steps.cool():
                self._run(mode)
            return
        # Start stays off (Cancel on) while the GPU cools: the next run is this comparison's.
        self.page.hold(f"Cooling down before {self.current[1]}…")
        self.cooling.run(steps.cool, lambda going_on: self._cooled(mode, going_on),
                         lambda error: self._stop_with(f"The cool-down failed: {error}"))

    def _cooled(self, mode: str, going_on: bool) -> None:
        self.page.hold(None)
        if going_on:
            self._run(mode)
        else:  # cancelled (or quit) while cooling: what ran so far is compared, the mode found put back
            self._show()

    def _on_cancel(self) -> None:
        """The page's Cancel: the run under way stops (the page's own), and so does a cool-down."""
        if self.steps is not None:
            self._stop.set()

    def _run(self, mode: str) -> None:
        if self.steps is None or self.current is None or self.current[0] != mode:
            return  # ended meanwhile (quit)
        self.page.controls.select_preset(QUICK_PRESET)
        self.page.start()
        if not self.page.running:  # refused to start (the page says why)
            self._stop_with(None)

    def _on_judged(self, done: FinishedRun) -> None:
        steps, result = self.steps, self.page.result
        if self.current is None or steps is None or result is None:
            return
        steps.add(self.current[0], _Judged(result, done))
        self.runs = list(steps.runs)
        QTimer.singleShot(0, self._next)  # ModeSteps says whether another mode runs (not after an aborted run)

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
        self._end()
        self.cooling.wait(5.0)
        for line in self._put_back():  # no card to show it in any more
            log.warning("%s", printable(line))

    def _end(self) -> None:
        self._stop.set()
        self.current, self.steps = None, None
        self.page.hold(None)

    def _stop_with(self, message: str | None) -> None:
        self._end()
        said = self._put_back()
        if message:
            self.page.verdict_card.show_message("Compare modes", printable(" ".join([message, *said])))
        elif said:  # the page says why the run did not start; the mode put back goes below it
            self.page.verdict_card.comparison.setText(printable(" ".join(said)))

    def _show(self) -> None:
        self._end()
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
