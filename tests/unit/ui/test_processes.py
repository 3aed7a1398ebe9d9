"""The processes table sorts numbers as numbers, filters, and ends only your own process after asking."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView

from desktop.telemetry.model import GpuProcess
from desktop.ui.pages.processes import COLUMNS, ProcessesPage, format_duration
from desktop.ui.theme import LIGHT

PROCS = [
    GpuProcess(pid=900, gpu_index=0, name="train.py", user="me", vram_mib=9000.0, cpu_pct=95.0,
               started_s=1000.0, own=True),
    GpuProcess(pid=12, gpu_index=1, name="Xorg", user="root", vram_mib=300.0, cpu_pct=1.0, started_s=10.0),
    GpuProcess(pid=4500, gpu_index=0, name="ipykernel_launcher", user="me", vram_mib=6144.0, cpu_pct=None,
               own=True),
]


def make_page(qtbot, end_process=None, confirm=None):
    page = ProcessesPage(LIGHT, end_process=end_process, confirm=confirm)
    page.model._now = lambda: 4600.0
    qtbot.addWidget(page)
    page.show()
    page.set_processes(PROCS)
    return page


def column(page, col):
    return [page.proxy.index(r, col).data() for r in range(page.proxy.rowCount())]


def test_the_table_sorts_numbers_as_numbers(qtbot):
    page = make_page(qtbot)
    assert column(page, 4) == ["9,000", "6,144", "300"]  # default: biggest VRAM first
    page.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    assert column(page, 0) == ["12", "900", "4500"]  # not "12", "4500", "900"
    page.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)
    assert column(page, 5) == ["95.0", "1.0", "n/a"]
    page.table.sortByColumn(1, Qt.SortOrder.AscendingOrder)
    assert column(page, 1) == ["ipykernel_launcher", "train.py", "Xorg"]
    page.table.sortByColumn(6, Qt.SortOrder.DescendingOrder)
    assert column(page, 6) == ["1 h 16 min", "1 h 00 min", "n/a"]


def test_the_filter_matches_name_user_or_pid(qtbot):
    page = make_page(qtbot)
    page.filter.setText("ROOT")
    assert column(page, 1) == ["Xorg"]
    page.filter.setText("4500")
    assert column(page, 1) == ["ipykernel_launcher"]
    page.filter.clear()
    assert page.proxy.rowCount() == 3


def test_end_process_only_for_own_processes_after_confirmation(qtbot):
    ended, asked = [], []
    answer = {"value": False}

    def confirm(proc):
        asked.append(proc.pid)
        return answer["value"]

    page = make_page(qtbot, end_process=lambda pid, started_s: ended.append(pid), confirm=confirm)
    page.filter.setText("Xorg")
    page.table.selectRow(0)
    assert page.selected().pid == 12
    assert not page.end_button.isEnabled()  # root's process
    page.end_selected()
    assert asked == [] and ended == []
    page.filter.setText("train")
    page.table.selectRow(0)
    assert page.end_button.isEnabled()
    page.end_selected()  # the user says no
    assert asked == [900] and ended == []
    answer["value"] = True
    page.end_selected()
    assert ended == [900]
    assert "Asked train.py" in page.message.text()


def test_an_error_from_ending_is_shown(qtbot):
    page = make_page(qtbot, end_process=lambda pid, started_s: "Not allowed to end process 900.",
                     confirm=lambda p: True)
    page.filter.setText("train")
    page.table.selectRow(0)
    page.end_selected()
    assert page.message.text() == "Not allowed to end process 900."


def test_empty_state_and_selection_survive_refresh(qtbot):
    page = make_page(qtbot)
    page.filter.setText("ipykernel")
    page.table.selectRow(0)
    page.set_processes(list(reversed(PROCS)))
    assert page.selected().pid == 4500
    page.set_processes([])
    assert page.stack.currentWidget() is page.empty
    assert "No process holds GPU memory" in page.empty.text()


def test_the_page_follows_snapshots(make_app):
    h = make_app()
    h.backend.manual.set(0, 0.5, 2048.0, name="train.py", pid=4242)
    h.tick(2)
    rows = h.app.processes.model.rows
    assert [(p.pid, p.name, p.vram_mib) for p in rows] == [(4242, "train.py", 2048.0)]


def test_format_duration():
    assert format_duration(59) == "0 min 59 s"
    assert format_duration(3600 * 5 + 60 * 7) == "5 h 07 min"
    assert format_duration(86400 * 2 + 3600) == "2 d 1 h"
    assert format_duration(None) == "n/a"


def test_the_asked_to_end_message_goes_when_the_process_is_gone(qtbot):
    page = make_page(qtbot, end_process=lambda pid, started_s: None, confirm=lambda p: True)
    page.filter.setText("train")
    page.table.selectRow(0)
    page.end_selected()
    assert page.message.isVisible() and "Asked train.py (pid 900)" in page.message.text()
    page.set_processes(PROCS)  # still there (it may take a while to end): the message stays
    assert page.message.isVisible()
    page.set_processes(PROCS[1:])  # gone
    assert not page.message.isVisible()


def test_columns_fit_their_contents_and_the_command_takes_the_rest(qtbot):
    page = make_page(qtbot)
    page.resize(1500, 600)
    header = page.table.horizontalHeader()
    container = COLUMNS.index("Container")
    command = COLUMNS.index("Command")
    assert header.sectionResizeMode(command) == QHeaderView.ResizeMode.Stretch
    # an empty Container column is as wide as its header, not a fixed 200 px
    assert header.sectionSize(container) < 120
    assert header.sectionSize(command) > header.sectionSize(container)
