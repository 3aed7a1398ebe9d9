"""The Compare dialog: run records from different machines (`stress -o`, `run -o`) side by side.

Pick two or more record files; the first is the reference every ratio is taken against
("Use as reference" moves another to the top). The table is ``advisor.compare_text.rows``,
the same one `rigscope compare` prints; environment facts that explain a throughput gap
(driver, CUDA, torch, precision, power limit) are highlighted when they differ. Files are
read off the GUI thread (``background.Loader``); a wrong or damaged file is listed with what
is wrong with it and left out of the comparison. Text from the files is shown verbatim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from advisor.compare_text import Row, flagged_sentence, rows
from advisor.portable import PortableRecord
from advisor.run_compare import Comparison, compare
from desktop.errors import UserError
from desktop.stress.portable import read_record
from desktop.ui.background import Loader
from desktop.ui.text import plain_label, plain_tooltip
from desktop.ui.theme import Theme

#: Where the window's shortcut for this dialog is documented (main_window adds it).
SHORTCUT = "Ctrl+K"
EMPTY_TEXT = ("Pick two or more run records to compare them side by side. Write one on each machine with "
              "rigscope stress --minutes 2 -o cloud.json (or rigscope run -o job.json -- python train.py). "
              "The first record is the reference the ratios are taken against.")
FLAG_TIP = "Differs between the records: this can explain a throughput gap"

Entry = tuple[Path, PortableRecord | str]


def _read(paths: Sequence[Path]) -> list[Entry]:
    """Each file's record, or what is wrong with it (on the worker thread): one refused file never costs the others."""
    out: list[Entry] = []
    for path in paths:
        try:
            out.append((path, read_record(path)))
        except UserError as exc:  # the parser's refusals: one line naming the field
            out.append((path, str(exc)))
        except Exception as exc:  # anything else is a bug, but still only this file's
            out.append((path, f"could not read it ({type(exc).__name__}: {exc})"))
    return out


class CompareDialog(QDialog):
    """Files on top (add, remove, reorder), the side-by-side table below, the flagged differences under it."""

    def __init__(self, theme: Theme, parent: QWidget | None = None, *,
                 pick_files: Callable[[QWidget], list[str]] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare runs")
        self.resize(1100, 720)
        self.theme = theme
        self._pick_files = pick_files or _ask_for_files
        self.entries: list[Entry] = []
        self.comparison: Comparison | None = None
        self.loader = Loader(self, name="compare")

        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.files = QListWidget()
        self.files.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.files.setMaximumHeight(120)
        self.files.setAccessibleName("Record files")
        top.addWidget(self.files, 1)
        buttons = QVBoxLayout()
        self.add_button = QPushButton("Add records…")
        self.add_button.setToolTip("Add run record files (Ctrl+O)")
        self.reference_button = QPushButton("Use as reference")
        self.reference_button.setToolTip("Compare every record against the selected one (Ctrl+R)")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Leave the selected files out (Delete)")
        for button in (self.add_button, self.reference_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        top.addLayout(buttons)
        layout.addLayout(top)

        self.empty_label = plain_label(EMPTY_TEXT)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.empty_label, 1)
        self.table = QTableWidget()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        self.table.setAccessibleName("Comparison")
        layout.addWidget(self.table, 1)
        self.summary = plain_label()
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        close = QPushButton("Close")
        close.clicked.connect(self.accept)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(close)
        layout.addLayout(bottom)

        self.add_button.clicked.connect(self.ask_for_files)
        self.reference_button.clicked.connect(self.use_selected_as_reference)
        self.remove_button.clicked.connect(self.remove_selected)
        self.files.itemSelectionChanged.connect(self._update_buttons)
        for sequence, slot in (("Ctrl+O", self.ask_for_files), ("Ctrl+R", self.use_selected_as_reference),
                               (QKeySequence.StandardKey.Delete, self.remove_selected)):
            shortcut = QShortcut(QKeySequence(sequence), self)
            shortcut.activated.connect(slot)
        self.apply_theme(theme)
        self._refresh()

    # --- files ---------------------------------------------------------------------------
    def ask_for_files(self) -> None:
        names = self._pick_files(self)
        if names:
            self.add_files([Path(n) for n in names])

    def add_files(self, paths: Sequence[Path]) -> None:
        """Read ``paths`` off the GUI thread and add them (a file already listed is read again)."""
        new = list(paths)
        self.add_button.setEnabled(False)
        self.loader.run(lambda: _read(new), self._added, self._read_failed)

    def _added(self, entries: list[Entry]) -> None:
        fresh = {path for path, _ in entries}
        self.entries = [e for e in self.entries if e[0] not in fresh] + entries
        self.add_button.setEnabled(True)
        self._refresh()

    def _read_failed(self, error: str) -> None:
        self.add_button.setEnabled(True)
        self.summary.setText(f"Could not read the files: {error}")

    def _selected_rows(self) -> list[int]:
        return sorted({self.files.row(item) for item in self.files.selectedItems()})

    def remove_selected(self) -> None:
        drop = set(self._selected_rows())
        self.entries = [e for i, e in enumerate(self.entries) if i not in drop]
        self._refresh()

    def use_selected_as_reference(self) -> None:
        selected = self._selected_rows()
        if not selected:
            return
        first = self.entries[selected[0]]
        self.entries = [first] + [e for e in self.entries if e is not first]
        self._refresh()
        self.files.setCurrentRow(0)

    def _update_buttons(self) -> None:
        any_selected = bool(self.files.selectedItems())
        self.remove_button.setEnabled(any_selected)
        self.reference_button.setEnabled(any_selected)

    # --- the comparison --------------------------------------------------------------------
    @property
    def records(self) -> list[PortableRecord]:
        return [value for _path, value in self.entries if isinstance(value, PortableRecord)]

    def _refresh(self) -> None:
        self._fill_files()
        records = self.records
        self.comparison = compare(records) if len(records) >= 2 else None
        comparing = self.comparison is not None
        self.table.setVisible(comparing)
        self.empty_label.setVisible(not comparing)
        if self.comparison is None:
            self.table.clear()
            self.table.setRowCount(0)
            self.summary.setText("")
            self._update_buttons()
            return
        self._fill_table(self.comparison)
        notes = [flagged_sentence(self.comparison), *(f"Note: {n}." for n in self.comparison.notes)]
        self.summary.setText("\n".join(notes))
        self._update_buttons()

    def _fill_files(self) -> None:
        self.files.clear()
        letter = 0
        for path, value in self.entries:
            if isinstance(value, PortableRecord):
                tag = chr(ord("A") + letter) if letter < 26 else "·"
                letter += 1
                text = f"{tag}  {path.name} — {value.label}" + ("   (reference)" if letter == 1 else "")
                item = QListWidgetItem(text)
            else:
                item = QListWidgetItem(f"✗  {path.name}: {value}")
                item.setForeground(QBrush(QColor(self.theme.bad)))
            item.setToolTip(plain_tooltip(str(path)))
            self.files.addItem(item)

    def _fill_table(self, comparison: Comparison) -> None:
        table_rows = rows(comparison)
        count = len(comparison.columns)
        headers = ["", *(f"{chr(ord('A') + i) if i < 26 else '·'}: {c.record.label}"
                         for i, c in enumerate(comparison.columns))]
        self.table.clear()
        self.table.setColumnCount(count + 1)
        self.table.setHorizontalHeaderLabels(headers)
        lines: list[Row | str] = []
        section = "result"
        for row in table_rows:
            if row.section != section:
                section = row.section
                lines.append("Environment")
            lines.append(row)
        self.table.setRowCount(len(lines))
        bold = QFont(self.font())
        bold.setBold(True)
        flag_background = QColor(self.theme.warn)
        flag_background.setAlpha(70)
        for r, line in enumerate(lines):
            if isinstance(line, str):
                heading = QTableWidgetItem(line)
                heading.setFont(bold)
                self.table.setItem(r, 0, heading)
                self.table.setSpan(r, 0, 1, count + 1)
                continue
            label = QTableWidgetItem(("⚠ " if line.flagged else "") + line.label)
            cells = [label, *(QTableWidgetItem(cell) for cell in line.cells)]
            for c, item in enumerate(cells):
                if line.flagged:
                    item.setBackground(QBrush(flag_background))
                    item.setFont(bold)
                    item.setToolTip(FLAG_TIP)
                elif line.section == "environment" and not line.differs:
                    item.setForeground(QBrush(QColor(self.theme.muted)))
                self.table.setItem(r, c, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        for c in range(1, count + 1):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.Stretch)

    def flagged_labels(self) -> list[str]:
        """The labels of the highlighted rows (what the user's eye is drawn to)."""
        if self.comparison is None:
            return []
        return [d.label for d in self.comparison.flagged]

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.empty_label.setStyleSheet(f"color: {theme.muted}; padding: 40px;")
        if self.comparison is not None or self.entries:
            self._refresh()

    def done(self, result: int) -> None:
        self.loader.discard()
        self.loader.wait(2.0)
        super().done(result)


def _ask_for_files(parent: QWidget) -> list[str]:
    names, _filter = QFileDialog.getOpenFileNames(parent, "Pick run records to compare", "",
                                                  "Run records (*.json);;All files (*)")
    return list(names)
