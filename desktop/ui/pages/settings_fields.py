"""The Settings page's field table: every setting it edits, in groups, with its label, unit, help and kind, and the
editor each kind gets; how a setting's value goes into its editor and comes back out, raw, for ``config.validate``.

A new setting is one ``Field`` in ``GROUPS``; a new kind of editor is one branch in each of ``make_editor``,
``show_value`` and ``editor_value``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox

from desktop import config
from desktop.config import Settings

Editor = QLineEdit | QCheckBox | QComboBox | QSpinBox


@dataclass(frozen=True)
class Field:
    """One setting on the page: its key in ``Settings``, its label and unit, and which editor it gets."""

    key: str  # "section.name"
    label: str
    unit: str = ""
    kind: str = "text"  # text | bool | choice | spin (whole numbers in ``config.allowed_range``)
    choices: tuple[str, ...] = ()
    help: str = ""
    #: For a spin box: what its minimum reads as (e.g. "forever" for 0 days).
    special: str = ""
    #: A text field's width in pixels (a URL needs more than a number).
    width: int = 110


_INTERVAL_LOW, _INTERVAL_HIGH = config.INTERVAL_RANGE_S


def _within(key: str) -> str:
    """``(1 to 30)``: the range ``config`` accepts for a setting, for its unit label."""
    low, high = config.allowed_range(key)
    return f"({low:g} to {high:g})"


GROUPS: tuple[tuple[str, tuple[Field, ...]], ...] = (
    ("Sampling", (
        Field("sampling.interval_s", "Sampling interval", f"s ({_INTERVAL_LOW:g} to {_INTERVAL_HIGH:g})",
              help=f"{config.SamplingSettings().interval_s:g} s is the sane default; faster polling can stutter games"),
        Field("sampling.process_interval_s", "Process list interval", "s",
              help="the slowest driver call: poll it less often"),
    )),
    ("History retention", (
        Field("retention.raw_days", "Keep every sample for", "days"),
        Field("retention.minute_days", "Keep minute averages for", "days"),
        Field("retention.hour_days", "Keep hourly averages for", "days", kind="spin", special="forever",
              help="0 (forever) keeps them for good"),
    )),
    ("Alerts", (
        Field("alerts.temperature_c", "GPU temperature above", "°C"),
        Field("alerts.vram_pct", "VRAM fuller than", "%"),
        Field("alerts.throttle_s", "Throttled for longer than", "s"),
        Field("alerts.gpu_lost", "When a GPU stops answering", kind="bool"),
        Field("alerts.debounce_s", "Repeat the same alert at most every", "s"),
    )),
    ("Appearance", (
        Field("appearance.theme", "Theme", kind="choice", choices=("system", "dark", "light")),
    )),
    ("Costs", (
        Field("costs.electricity_price_per_kwh", "Electricity price", "per kWh"),
        Field("costs.currency", "Currency", help="e.g. USD, EUR"),
    )),
    ("Job guard (rigscope run --guard-c)", (
        Field("jobs.guard_resume_offset_c", "Let the job run again at", f"°C below the guard "
              f"{_within('jobs.guard_resume_offset_c')}",
              help="--guard-c T pauses the job when the GPU reaches T °C and continues it this far below T"),
        Field("jobs.guard_min_pause_s", "Pause at least", f"s {_within('jobs.guard_min_pause_s')}",
              help="a paused job stays paused at least this long, even when the GPU cools sooner"),
        Field("jobs.guard_min_run_s", "Run at least", f"s {_within('jobs.guard_min_run_s')}",
              help="after a resume the job runs at least this long before it may be paused again"),
    )),
    ("Fleet (the Fleet page, rigscope fleet)", (
        Field("fleet.url", "Prometheus URL", width=320,
              help="the Prometheus server that scrapes your machines, e.g. http://prometheus:9090; empty: the "
                   "Fleet page is off. Credentials: RIGSCOPE_FLEET_TOKEN, or RIGSCOPE_FLEET_USER and "
                   "RIGSCOPE_FLEET_PASSWORD, or token_file / user + password_file under [fleet]"),
        Field("fleet.timeout_s", "Give up on a request after", f"s {_within('fleet.timeout_s')}"),
    )),
    ("Startup", (
        Field("startup.start_at_login", "Record from login (recorder service)", kind="bool"),
    )),
)


def setting_value(settings: Settings, key: str) -> Any:
    """The value of ``"section.name"`` in ``settings``."""
    section, name = key.split(".")
    return getattr(getattr(settings, section), name)


def make_editor(f: Field) -> Editor:
    """The editor of field ``f``: a spin box with its unit, a check box, a drop-down or a right-aligned text box;
    named after its key, its help as tooltip."""
    editor: Editor
    if f.kind == "spin":
        low, high = config.allowed_range(f.key)
        editor = QSpinBox(minimum=int(low), maximum=int(min(high, 2**31 - 1)))
        editor.setSpecialValueText(f.special)  # the minimum reads as a word, e.g. 0 days: "forever"
        editor.setSuffix(f" {f.unit}")
        editor.setAlignment(Qt.AlignmentFlag.AlignRight)
    elif f.kind == "bool":
        editor = QCheckBox()
    elif f.kind == "choice":
        editor = QComboBox()
        editor.addItems(list(f.choices))
    else:
        editor = QLineEdit()
        editor.setFixedWidth(f.width)
        editor.setAlignment(Qt.AlignmentFlag.AlignRight)
    editor.setObjectName(f.key)
    editor.setToolTip(f.help)
    return editor


def show_value(editor: Editor, value: Any) -> None:
    """Put a setting's value into its editor."""
    if isinstance(editor, QCheckBox):
        editor.setChecked(bool(value))
    elif isinstance(editor, QComboBox):
        editor.setCurrentText(str(value))
    elif isinstance(editor, QSpinBox):
        editor.setValue(int(value))
    else:
        editor.setText(f"{value:g}" if isinstance(value, float) else str(value))


def editor_value(editor: Editor) -> Any:
    """What an editor holds, raw (the text stripped), for ``config.validate`` to check."""
    if isinstance(editor, QCheckBox):
        return editor.isChecked()
    if isinstance(editor, QComboBox):
        return editor.currentText()
    if isinstance(editor, QSpinBox):
        return editor.value()
    return editor.text().strip()
