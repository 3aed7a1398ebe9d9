"""The Stress page's widgets on their own: the controls row, the run as it goes, and the earlier-runs panel."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from advisor.frame import StressResult
from desktop.stress.run_model import Progress
from desktop.ui.theme import resolve
from desktop.ui.widgets.stress_controls import PRESETS, StressControls
from desktop.ui.widgets.stress_live import StressLive
from desktop.ui.widgets.stress_runs import EarlierRuns


def _run(run_id: int) -> StressResult:
    return StressResult(run_id=run_id, started_s=1_790_000_000.0 + run_id, ended_s=1_790_000_600.0 + run_id,
                        gpu_uuid="GPU-x", gpu_name="sim", workload="gemm", dtype="fp32", unit="TFLOP/s",
                        peak_throughput=50.0, sustained_throughput=40.0, throttled=True, errors=0,
                        driver_version=None, summary=f"run {run_id}", device="sim")


def test_the_controls_say_what_is_chosen_and_leave_only_cancel_while_busy(qtbot: QtBot) -> None:
    controls = StressControls([(0, "RTX A"), (3, "RTX B")])
    qtbot.addWidget(controls)
    controls.show()
    assert controls.gpu_combo.isVisibleTo(controls) and controls.selected_gpu() == 0
    controls.gpu_combo.setCurrentIndex(1)
    assert controls.selected_gpu() == 3  # the NVML index, not the picker's row
    with qtbot.waitSignal(controls.preset_changed):
        controls.select_preset(0)
    assert controls.preset() == PRESETS[0]
    controls.set_busy(True, workload_fixed=False)
    assert controls.cancel_button.isEnabled() and not controls.one_click.isEnabled()
    assert not controls.gpu_combo.isEnabled() and not any(b.isEnabled() for b in controls.presets.buttons())
    controls.set_busy(False, workload_fixed=True)  # the simulated GPU: GEMM only
    assert controls.one_click.isEnabled() and not controls.cancel_button.isEnabled()
    assert not controls.workload.isEnabled() and controls.precision.isEnabled()
    extra = QPushButton("Compare modes")
    controls.add_control(extra)
    assert controls.row.indexOf(extra) == controls.row.indexOf(controls.one_click) - 1


def test_one_gpu_or_none_hides_the_picker(qtbot: QtBot) -> None:
    one, none = StressControls([(2, "RTX")]), StressControls()
    for controls in (one, none):
        qtbot.addWidget(controls)
        controls.show()
        assert not controls.gpu_combo.isVisibleTo(controls)
    assert one.selected_gpu() == 2 and none.selected_gpu() == 0


def test_the_live_view_charts_only_the_running_phase(qtbot: QtBot) -> None:
    live = StressLive(resolve("light"))
    qtbot.addWidget(live)
    assert not live.charts_shown
    live.begin()
    assert live.charts_shown and len(live.buffer) == 0 and live.readout.text() == ""
    live.show_progress(Progress(0.0, 120.0, None, "", phase="starting", time_s=100.0))
    assert live.progress_bar.format() == "Starting the workload…" and len(live.buffer) == 0
    live.show_progress(Progress(60.0, 120.0, 41.5, "TFLOP/s", temperature_c=80.4, sm_clock_mhz=1800.0, power_w=149.6,
                                errors=2, time_s=160.0))
    assert len(live.buffer) == 1 and live.progress_bar.value() == 500
    assert live.readout.text() == "41.5 TFLOP/s   80 °C   1800 MHz   150 W   2 errors"
    assert live.charts.plot("throughput").unit == "TFLOP/s"  # the throughput's unit comes with the run
    live.begin()  # the next run starts on empty charts
    assert len(live.buffer) == 0


def test_the_earlier_runs_panel_reloads_only_when_idle_and_redraws_only_on_change(qtbot: QtBot,
                                                                                  tmp_path: Path) -> None:
    stored = [_run(1)]
    reads: list[Path | None] = []
    busy = [False]

    def read_runs(db_path: Path | None) -> list[StressResult]:
        reads.append(db_path)
        return list(stored)

    panel = EarlierRuns(tmp_path / "history.sqlite", read_runs, lambda: busy[0])
    qtbot.addWidget(panel)
    shown: list[list[StressResult]] = []
    panel.shown.connect(shown.append)
    panel.refresh()
    qtbot.waitUntil(lambda: not panel.loading and len(shown) == 1)
    assert panel.table.rowCount() == 1 and panel.title.text() == "Earlier runs"
    panel.reload()  # the same runs: nothing redrawn
    qtbot.waitUntil(lambda: not panel.loading and len(reads) == 2)
    assert len(shown) == 1
    busy[0] = True  # a run under way refreshes the table itself
    panel.reload()
    assert not panel.loading and len(reads) == 2
    busy[0] = False
    stored.insert(0, _run(2))
    panel.reload()
    qtbot.waitUntil(lambda: len(shown) == 2)
    assert [r.run_id for r in panel.runs] == [2, 1] and panel.table.rowCount() == 2
    panel.failed("OSError: database is locked")
    assert panel.title.text() == "Earlier runs: could not be read (OSError: database is locked)"
