"""Stress page papercuts (issue 14, item 6): the empty state, one way to start, units, the GPU picker, guards."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton
from pytestqt.qtbot import QtBot

from advisor.frame import StressResult
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from desktop.ui.pages.stress_page import StressPage
from desktop.ui.theme import resolve
from desktop.ui.widgets.stress_live import MIN_SPANS
from desktop.ui.widgets.stress_runs import NO_RUN_TITLE, run_cells

REAL_S_PER_S = 0.002


def runners(profiles: str = "rtx4090-laptop", guard_c: float | None = None):  # type: ignore[no-untyped-def]
    make = runner_factory(lambda: SimulatedBackend(parse_profile_list(profiles), ManualLoad(), seed=5),
                          clock=SimClock(real_s_per_s=REAL_S_PER_S))

    def build(config: StressConfig) -> StressRunner:
        return make(replace(config, guard_c=guard_c))
    return build


def _run(run_id: int, summary: str = "Throttled after 2 min 30 s: HW thermal slowdown") -> StressResult:
    return StressResult(run_id=run_id, started_s=1_790_000_000.0 + run_id, ended_s=1_790_000_600.0 + run_id,
                        gpu_uuid="GPU-x", gpu_name="RTX 4090 Laptop", workload="gemm", dtype="bf16", unit="TFLOP/s",
                        peak_throughput=72.3, sustained_throughput=66.6, throttled=True, errors=0,
                        driver_version=None, summary=summary, device="sim")


def _page(qtbot: QtBot, theme: str = "light", **kwargs: object) -> StressPage:
    kwargs.setdefault("db_path", None)
    page = StressPage(resolve(theme), kwargs.pop("make_runner", runners()), device=str(kwargs.pop("device", "sim")),
                      **kwargs)  # type: ignore[arg-type]
    qtbot.addWidget(page)
    page.resize(1400, 950)
    page.show()
    return page


def test_before_the_first_run_the_chart_area_explains_itself(qtbot: QtBot, tmp_path: Path) -> None:
    page = _page(qtbot)
    assert not page.live.charts_shown and page.live.empty_state.isVisibleTo(page)
    assert "Start Sustained 10 min test" in page.live.empty_state.text()
    assert page.verdict_title.text() == NO_RUN_TITLE  # nothing stored, nothing run
    shots = Path(os.environ.get("RIGSCOPE_SCREENSHOTS", str(tmp_path)))
    page.grab().save(str(shots / "stress-empty.png"))
    page.controls.presets.button(0).setChecked(True)
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.start()
    assert page.live.charts_shown  # the run's charts stay after it
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)


def test_no_test_run_yet_only_when_there_is_none(qtbot: QtBot, tmp_path: Path) -> None:
    page = _page(qtbot, db_path=tmp_path / "h.sqlite", read_runs=lambda _db: [_run(2), _run(1)])
    qtbot.waitUntil(lambda: not page.loading)
    assert page.verdict_title.text().startswith("Last run: ") and NO_RUN_TITLE not in page.verdict_title.text()
    assert "Throttled after 2 min 30 s" in page.verdict_text.text()
    empty = _page(qtbot, db_path=tmp_path / "h.sqlite", read_runs=lambda _db: [])
    qtbot.waitUntil(lambda: not empty.loading)
    assert empty.verdict_title.text() == NO_RUN_TITLE and "none stored yet" in empty.earlier_runs.title.text()


def test_one_start_button_runs_the_preset_shown_selected(qtbot: QtBot) -> None:
    page = _page(qtbot)
    starts = [b for b in page.findChildren(QPushButton) if b.text().startswith(("Start", "Run"))]
    assert starts == [page.controls.one_click] and page.controls.start_button is page.controls.one_click
    assert page.controls.one_click.text() == "Start Sustained 10 min test"
    assert page.controls.presets.checkedButton().text() == "Sustained 10 min"
    assert "QPushButton#preset:checked" in page.styleSheet()  # the chosen preset stands out
    page.controls.presets.button(0).setChecked(True)
    assert page.controls.one_click.text() == "Start Quick 2 min test" and "Quick 2 min" in page.live.empty_state.text()
    page.activateWindow()  # shortcuts need the active window; offscreen it arrives through the event loop
    qtbot.waitUntil(lambda: QApplication.activeWindow() is page)
    with qtbot.waitSignal(page.finished, timeout=60_000):
        qtbot.keyClick(page.controls.workload, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert page.result is not None and page.result.config.duration_s == 120.0
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)


def test_every_live_chart_keeps_a_minimum_y_span() -> None:
    assert MIN_SPANS["temperature_c"][0] >= 5.0 and MIN_SPANS["sm_clock_mhz"][0] >= 100.0
    assert MIN_SPANS["power_w"][0] >= 10.0 and MIN_SPANS["throughput"][1] > 0.0


def test_the_live_charts_use_their_spans(qtbot: QtBot) -> None:
    page = _page(qtbot)
    for key, (span, fraction) in MIN_SPANS.items():
        plot = page.live.charts.plot(key)
        assert (plot.min_span, plot.min_span_fraction) == (span, fraction)


def test_units_in_every_numeric_column() -> None:
    started, _workload, _device, sustained, peak, _verdict = run_cells(_run(1))
    assert started.endswith("(10 min)")
    assert sustained == "66.6 TFLOP/s" and peak == "72.3 TFLOP/s"


def test_a_gpu_picker_only_with_several_gpus_and_the_run_uses_the_chosen_one(qtbot: QtBot) -> None:
    one = _page(qtbot, gpus=[(0, "RTX 4090 Laptop")])
    assert not one.controls.gpu_combo.isVisibleTo(one) and one.selected_config().gpu_index == 0
    page = _page(qtbot, make_runner=runners("rtx4090-laptop,rtx4090"),
                 gpus=[(0, "RTX 4090 Laptop"), (1, "RTX 4090")])
    assert page.controls.gpu_combo.isVisibleTo(page) and page.controls.gpu_combo.count() == 2
    page.controls.gpu_combo.setCurrentIndex(1)
    assert page.selected_config().gpu_index == 1
    page.controls.presets.button(0).setChecked(True)
    with qtbot.waitSignal(page.finished, timeout=60_000):
        page.start()
    assert page.result is not None and page.result.gpu is not None and page.result.gpu.index == 1
    assert "RTX 4090" in page.result.gpu.name and "Laptop" not in page.result.gpu.name
    qtbot.waitUntil(lambda: not page.running, timeout=10_000)
    cuda = _page(qtbot, device="cuda:0", gpus=[(0, "A"), (1, "B")])
    cuda.controls.gpu_combo.setCurrentIndex(1)
    assert cuda.selected_config().device == "cuda:1"


def test_a_guard_below_the_current_temperature_is_refused_on_the_page(qtbot: QtBot) -> None:
    page = _page(qtbot, theme="dark", make_runner=runners(guard_c=35.0))  # the laptop starts at 35 °C
    page.start()
    qtbot.waitUntil(lambda: page.worker is None and not page.running, timeout=10_000)
    assert page.verdict_title.text() == "Cannot run the test"
    assert "current temperature" in page.verdict_text.text() and "stop at once" in page.verdict_text.text()
    assert page.controls.one_click.isEnabled()
