"""The Processes page shows per-process utilization (n/a where unreported, never 0), command and container,
and a chart of the selected process's SM and memory utilization from the live snapshots."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np
from PySide6.QtCore import Qt

from desktop.telemetry.model import GpuProcess
from desktop.ui.pages.processes import COLUMNS, ProcessesPage, UtilizationHistory
from desktop.ui.theme import DARK, LIGHT

T0 = 1_790_000_000.0
TRAIN = GpuProcess(pid=900, gpu_index=0, name="python", user="ana", vram_mib=9000.0, cpu_pct=98.0, started_s=T0 - 4000,
                   own=True, sm_util_pct=87.0, mem_util_pct=41.0, enc_util_pct=0.0, dec_util_pct=0.0,
                   command="python train.py --cfg a.yaml", container="docker:trainer (3f2a9c1b4e5d)")
NOTEBOOK = GpuProcess(pid=4500, gpu_index=0, name="python", user="ana", vram_mib=6144.0, cpu_pct=3.0,
                      started_s=T0 - 900, own=True, sm_util_pct=0.0, mem_util_pct=0.0, enc_util_pct=0.0,
                      dec_util_pct=0.0, command="python -m ipykernel_launcher")
GAME = GpuProcess(pid=77, gpu_index=1, name="game.exe", user="bob", vram_mib=3000.0, kind="graphics",
                  started_s=T0 - 60)  # a GPU that reports no per-process utilization
PROCS = [TRAIN, NOTEBOOK, GAME]


def _page(qtbot, theme=LIGHT):
    page = ProcessesPage(theme)
    qtbot.addWidget(page)
    page.resize(1400, 640)
    page.show()
    return page


def _column(page, name):
    col = COLUMNS.index(name)
    return [page.proxy.index(r, col).data() for r in range(page.proxy.rowCount())]


def _select(page, pid):
    for row in range(page.proxy.rowCount()):
        if page.proxy.index(row, 0).data() == str(pid):
            page.table.selectRow(row)
            return
    raise AssertionError(pid)


def test_columns_show_utilization_na_never_zero_and_attribution(qtbot):
    page = _page(qtbot)
    page.set_processes(PROCS, T0)
    assert _column(page, "SM (%)") == ["87", "0", "n/a"]  # VRAM order: 9000, 6144, 3000
    assert _column(page, "Mem (%)") == ["41", "0", "n/a"]
    assert _column(page, "Enc (%)") == ["0", "0", "n/a"]
    assert _column(page, "Command") == ["python train.py --cfg a.yaml", "python -m ipykernel_launcher", "n/a"]
    assert _column(page, "Container")[0] == "docker:trainer (3f2a9c1b4e5d)"
    page.table.sortByColumn(COLUMNS.index("SM (%)"), Qt.SortOrder.DescendingOrder)
    assert _column(page, "PID") == ["900", "4500", "77"]  # numbers, n/a last
    game = page.proxy.index(2, COLUMNS.index("SM (%)"))
    assert "does not report" in game.data(Qt.ItemDataRole.ToolTipRole)
    # Utilization sits next to VRAM in the header, the command and container at the end.
    header = page.table.horizontalHeader()
    assert header.visualIndex(COLUMNS.index("SM (%)")) == header.visualIndex(COLUMNS.index("VRAM (MiB)")) + 1
    assert header.visualIndex(COLUMNS.index("Container")) == len(COLUMNS) - 1


def test_the_filter_matches_command_and_container(qtbot):
    page = _page(qtbot)
    page.set_processes(PROCS, T0)
    page.filter.setText("trainer")
    assert _column(page, "PID") == ["900"]
    page.filter.setText("ipykernel")
    assert _column(page, "PID") == ["4500"]


def test_history_keeps_the_window_and_nan_for_na():
    history = UtilizationHistory(window_s=60.0)
    for i in range(10):
        history.add([replace(TRAIN, sm_util_pct=float(i)), GAME], T0 + 10 * i)
    time_s, sm, _ = history.series(900, 0)
    assert time_s.tolist() == [T0 + 30 + 10 * i for i in range(7)]  # the last 60 s
    assert sm.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert np.isnan(history.series(77, 1)[1]).all()
    history.add([TRAIN], T0 + 90)  # the same poll again: kept once
    assert len(history.series(900, 0)[0]) == 7
    history.add([], T0 + 1000)  # everyone gone: forgotten
    assert len(history.series(900, 0)[0]) == 0


def test_the_chart_follows_the_selected_process(qtbot):
    page = _page(qtbot)
    assert "Select a process" in page.chart_note.text()
    for i in range(12):
        page.set_processes([replace(TRAIN, sm_util_pct=50.0 + 4 * i), NOTEBOOK, GAME], T0 + 5 * i)
    _select(page, 900)
    assert page.chart_stack.currentWidget() is page.chart
    assert "pid 900" in page.chart_title.text()
    times, values = page.util_plot.data("sm")
    assert values.tolist() == [50.0 + 4 * i for i in range(12)]
    assert times[-1] == T0 + 55
    _select(page, 77)
    assert page.chart_stack.currentWidget() is page.chart_note
    assert page.chart_note.text().startswith("n/a")
    # A new poll keeps the selection and feeds the chart.
    _select(page, 900)
    page.set_processes([replace(TRAIN, sm_util_pct=10.0), NOTEBOOK, GAME], T0 + 60)
    assert page.selected().pid == 900
    assert page.util_plot.data("sm")[1][-1] == 10.0
    assert not math.isnan(page.util_plot.data("mem")[1][-1])


def test_screenshot_of_the_processes_page(qtbot):
    for theme in (DARK, LIGHT):
        page = _page(qtbot, theme)
        page.apply_theme(theme)
        for i in range(60):
            sm = 70.0 + 25.0 * math.sin(i / 6.0)
            page.set_processes([replace(TRAIN, sm_util_pct=round(sm), mem_util_pct=round(sm * 0.45)),
                                replace(NOTEBOOK, sm_util_pct=float(i % 20 == 0) * 12.0), GAME], T0 + 5 * i)
        _select(page, 900)
        qtbot.wait(50)
        image = page.grab()
        assert image.width() > 0
        shots = os.environ.get("RIGSCOPE_SHOTS_DIR")
        if shots:
            os.makedirs(shots, exist_ok=True)
            image.save(os.path.join(shots, f"processes-{theme.name}.png"))
