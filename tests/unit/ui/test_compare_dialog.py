"""The Compare dialog: record files side by side, flagged differences highlighted, bad files listed, not fatal."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QTableWidgetItem

from advisor.portable import Environment, PortableRecord, Spread
from desktop.stress.portable import write_record
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.compare_dialog import CompareDialog
from tools.compare_shot import simulated_record


def _laptop() -> PortableRecord:
    return PortableRecord(
        kind="stress", workload="gemm", started_s=1_790_000_000.0, duration_s=600.0,
        environment=Environment(gpu_name="RTX 4090 Laptop", driver="550.54.14", torch="2.3.1", power_limit_w=150.0),
        machine="vector", device="cuda:0", dtype="bf16", unit="TFLOP/s", throughput=66.6,
        power_w=Spread(140.0, 148.0, 150.0, 148.0), verdict="throttled")


def _cloud() -> PortableRecord:
    laptop = _laptop()
    return replace(laptop, machine="cloud", throughput=133.2, verdict="passed",
                   environment=replace(laptop.environment, gpu_name="RTX 4090", driver="535.104.05"))


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = [tmp_path / "laptop.json", tmp_path / "cloud.json"]
    write_record(paths[0], _laptop())
    write_record(paths[1], _cloud())
    return paths


def _open(qtbot, paths: list[Path], theme=DARK) -> CompareDialog:  # type: ignore[no-untyped-def]
    dialog = CompareDialog(theme, pick_files=lambda _parent: [str(p) for p in paths])
    qtbot.addWidget(dialog)
    dialog.ask_for_files()
    qtbot.waitUntil(lambda: not dialog.loader.busy)
    return dialog


def _cell(dialog: CompareDialog, row: int, column: int) -> QTableWidgetItem:
    item = dialog.table.item(row, column)
    assert item is not None
    return item


def _header(dialog: CompareDialog, column: int) -> QTableWidgetItem:
    item = dialog.table.horizontalHeaderItem(column)
    assert item is not None
    return item


def _row(dialog: CompareDialog, label: str) -> int:
    for r in range(dialog.table.rowCount()):
        item = dialog.table.item(r, 0)
        if item is not None and item.text().endswith(label):
            return r
    raise AssertionError(f"no row {label!r}")


def test_two_records_side_by_side_with_the_driver_difference_highlighted(qtbot, files: list[Path]) -> None:  # type: ignore[no-untyped-def]
    dialog = _open(qtbot, files)
    assert dialog.table.isVisibleTo(dialog) and not dialog.empty_label.isVisibleTo(dialog)
    assert dialog.table.columnCount() == 3
    assert _header(dialog, 1).text() == "A: vector · RTX 4090 Laptop"
    throughput = _row(dialog, "throughput (sustained)")
    assert _cell(dialog, throughput, 2).text() == "133 TFLOP/s (2.00×)"
    driver = _row(dialog, "NVIDIA driver")
    assert _cell(dialog, driver, 0).text() == "⚠ NVIDIA driver"
    assert _cell(dialog, driver, 1).text() == "550.54.14" and _cell(dialog, driver, 2).text() == "535.104.05"
    highlight = _cell(dialog, driver, 1).background().color()
    assert highlight.rgb() == QColor(DARK.warn).rgb()
    torch = _row(dialog, "PyTorch")
    assert _cell(dialog, torch, 0).text() == "PyTorch"  # the same on both: not flagged
    assert _cell(dialog, torch, 1).background().style() == Qt.BrushStyle.NoBrush
    assert dialog.flagged_labels() == ["NVIDIA driver"]
    assert "NVIDIA driver 550.54.14 vs 535.104.05" in dialog.summary.text()


def test_use_as_reference_takes_ratios_against_the_selected_record(qtbot, files: list[Path]) -> None:  # type: ignore[no-untyped-def]
    dialog = _open(qtbot, files)
    dialog.files.setCurrentRow(1)
    dialog.use_selected_as_reference()
    assert _header(dialog, 1).text().startswith("A: cloud")
    throughput = _row(dialog, "throughput (sustained)")
    assert _cell(dialog, throughput, 2).text() == "66.6 TFLOP/s (0.50×)"
    assert dialog.files.item(0).text().endswith("(reference)")


def test_a_damaged_file_is_listed_with_why_and_left_out(qtbot, files: list[Path], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "rigscope-run", "version": 1, "kind": "stress"', encoding="utf-8")
    dialog = _open(qtbot, [files[0], bad])
    assert dialog.files.count() == 2 and "not valid JSON" in dialog.files.item(1).text()
    assert dialog.files.item(1).text().startswith("✗  bad.json")
    # One good record is not a comparison: the empty state explains what to do.
    assert dialog.comparison is None and dialog.empty_label.isVisibleTo(dialog)
    assert "rigscope stress --minutes 2 -o" in dialog.empty_label.text()
    dialog.add_files([files[1]])
    qtbot.waitUntil(lambda: not dialog.loader.busy)
    assert dialog.comparison is not None and len(dialog.comparison.columns) == 2


def test_remove_leaves_a_file_out(qtbot, files: list[Path]) -> None:  # type: ignore[no-untyped-def]
    dialog = _open(qtbot, files)
    dialog.show()
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    dialog.files.setCurrentRow(0)
    qtbot.keyClick(dialog, Qt.Key.Key_Delete)
    assert [p.name for p, _ in dialog.entries] == ["cloud.json"] and dialog.comparison is None


def test_a_hostile_machine_name_is_shown_as_the_text_it_is(qtbot, tmp_path: Path, files: list[Path]) -> None:  # type: ignore[no-untyped-def]
    evil = tmp_path / "evil.json"
    write_record(evil, replace(_cloud(), machine='<img src="/etc/passwd"><b>x</b>'))
    dialog = _open(qtbot, [files[0], evil])
    assert _header(dialog, 2).text() == 'B: <img src="/etc/passwd"><b>x</b> · RTX 4090'
    assert dialog.summary.textFormat() == Qt.TextFormat.PlainText


def test_simulated_runs_compare_in_both_themes(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    laptop = simulated_record("rtx4090-laptop", "bf16", "laptop", None, duration_s=120.0)
    desktop = simulated_record("rtx4090", "fp16", "desktop", 0.69, duration_s=120.0)
    assert laptop.environment.simulated and laptop.energy_j and laptop.throughput and desktop.throughput
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    write_record(paths[0], laptop)
    write_record(paths[1], desktop)
    dialog = _open(qtbot, paths, LIGHT)
    assert "precision" in dialog.flagged_labels()
    cost = _row(dialog, "cost of work")
    assert _cell(dialog, cost, 2).text().endswith("USD per 1M TFLOP") and _cell(dialog, cost, 1).text() == "—"
    dialog.apply_theme(DARK)
    precision = _row(dialog, "precision")
    assert _cell(dialog, precision, 1).background().color().rgb() == QColor(DARK.warn).rgb()
    image = dialog.grab()
    assert not image.isNull() and image.width() > 500


def test_ctrl_k_opens_the_dialog_from_the_window(qtbot) -> None:  # type: ignore[no-untyped-def]
    from desktop.ui.main_window import MainWindow

    window = MainWindow(DARK)
    qtbot.addWidget(window)
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    dialog = window.compare_dialog
    assert isinstance(dialog, CompareDialog) and dialog.isVisible()
    assert dialog.empty_label.isVisibleTo(dialog)  # nothing picked yet: it says what to do
    window.apply_theme(LIGHT)
    assert dialog.theme is LIGHT
    dialog.close()


def test_hostile_files_are_listed_and_the_good_ones_kept(qtbot, files: list[Path], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    head = '{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1'
    bad = {"overflow.json": head + ', "energy_j": ' + "9" * 400 + "}",
           "digits.json": head + ', "energy_j": ' + "9" * 4301 + "}",
           "surrogate.json": head + ', "machine": "\\udcff"}',
           "deep.json": "[" * 100_000 + "]" * 100_000}
    paths = []
    for name, text in bad.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(text, encoding="utf-8")
    dialog = _open(qtbot, [files[0], *paths, files[1]])
    assert dialog.comparison is not None and len(dialog.comparison.columns) == 2
    listed = [dialog.files.item(i).text() for i in range(dialog.files.count())]
    assert [t.startswith("✗") for t in listed] == [False, True, True, True, True, False]
    assert '"energy_j"' in listed[1] and '"energy_j"' in listed[2] and '"machine"' in listed[3]
