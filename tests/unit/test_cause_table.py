"""One table per throttle cause (issue 35 item 5): advisor/clock_events.py's ``REASON_TABLE`` is what decoding,
counters, verdicts, lanes, `rigscope sample`, nvidia-smi imports, the exporter and the history read."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from advisor.causes import CAUSE_BITS, CAUSE_COUNTER_FIELDS, CAUSE_FAMILY, CAUSE_LABELS, SLOWDOWN_CAUSES
from advisor.clock_events import (
    CLOCK_EVENT_COUNTERS,
    COUNTER_ROWS,
    LANE_ROWS,
    POWER_REASONS,
    REASON_TABLE,
    SINGLE_REASONS,
    THERMAL_REASONS,
    THROTTLE_REASONS,
    ClockEventReason,
)
from desktop.cli.sample import SHORT_REASONS
from desktop.history.layout import COUNTER_METRICS, GPU_SCALES
from desktop.history.nvsmi_csv import REASON_FIELDS
from desktop.telemetry.metric_names import VIOLATION_COUNTERS
from desktop.telemetry.model import METRICS_BY_NAME, GpuSample
from desktop.telemetry.nvml.counters import ALL_COUNTER_FIELDS, CounterTracker
from desktop.telemetry.nvml.counters import CAUSE_BITS as COUNTER_BITS

REPO = Path(__file__).resolve().parents[2]
#: How the issue counts the files that name the power brake cause (its bit, its verdict cause, its counter).
POWER_BRAKE = re.compile(r"hw_power_brake|power_brake", re.IGNORECASE)
MAX_FILES_NAMING_A_CAUSE = 6


def files_naming(pattern: re.Pattern[str]) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for package in ("desktop", "advisor") for p in (REPO / package).rglob("*")
                  if p.suffix in {".py", ".sql", ".toml"} and pattern.search(p.read_text(encoding="utf-8")))


def test_the_power_brake_cause_is_named_in_at_most_six_files() -> None:
    named = files_naming(POWER_BRAKE)
    assert len(named) <= MAX_FILES_NAMING_A_CAUSE, named
    assert "advisor/clock_events.py" in named  # its row


def test_one_row_per_bit_and_every_reader_follows_the_rows() -> None:
    assert tuple(row.reason for row in REASON_TABLE) == SINGLE_REASONS
    for row in REASON_TABLE:
        assert row.reason.label == row.label and SHORT_REASONS[row.reason] == row.short
        assert (REASON_FIELDS.get(row.nvsmi) if row.nvsmi else None) == (int(row.reason) if row.nvsmi else None)
        assert row.reason.family == row.family
        assert bool(row.reason & THROTTLE_REASONS) == (row.cause is not None)
        assert bool(row.reason & THERMAL_REASONS) == (row.family == "thermal")
        assert bool(row.reason & POWER_REASONS) == (row.family == "power")
        if row.cause is None:
            continue
        assert CAUSE_BITS[row.cause] == int(row.reason) and CAUSE_LABELS[row.cause] == row.phrase
        assert CAUSE_FAMILY[row.cause] == row.family and (row.cause in SLOWDOWN_CAUSES) == row.slowdown
        assert row in LANE_ROWS and row.colour is not None


def test_each_counter_row_is_a_sample_field_a_metric_a_history_column_an_nvml_field_and_an_exported_violation() -> None:
    sample_fields = {f.name for f in dataclasses.fields(GpuSample)}
    tracker = CounterTracker("580.82.07")
    for row in COUNTER_ROWS:
        counter = row.counter
        assert counter is not None
        assert counter.field in sample_fields and METRICS_BY_NAME[counter.field].unit == "s"
        assert counter.field in COUNTER_METRICS and GPU_SCALES[counter.field] == 1000  # ms in the history
        assert (counter.field, row.reason) in CLOCK_EVENT_COUNTERS
        assert COUNTER_BITS[counter.field] == int(row.reason)
        assert set(counter.field_ids) <= set(ALL_COUNTER_FIELDS[counter.field])
        assert counter.field_ids[1] in {c.fid for c in tracker.candidates[counter.field]}
        assert row.cause is not None and CAUSE_COUNTER_FIELDS[row.cause] == counter.field
        exported = [name for name, _help, fields in VIOLATION_COUNTERS if counter.field in fields]
        assert row.family is not None and exported == [f"DCGM_FI_DEV_{row.family.upper()}_VIOLATION"]


def test_the_power_brake_row_reaches_every_reader() -> None:
    brake = ClockEventReason.HW_POWER_BRAKE_SLOWDOWN
    (row,) = (r for r in REASON_TABLE if r.reason == brake)
    assert (row.label, row.short, row.nvsmi, row.phrase, row.family) == (
        "Power brake", "brake", "hw_power_brake_slowdown", "power brake", "power")
    assert row.counter is not None and row.counter.field_ids == (253, 271)  # R575, R580.82 (counters.py's table)
    assert LANE_ROWS.index(row) == 1  # under the power cap, above the thermal causes


#: Run in a child: advisor/clock_events.py with BOARD_LIMIT made a throttle cause (a row changed, nothing else),
#: loaded in place of the real module before anything reads it; prints what each reader then says about it.
_NEW_CAUSE_CHILD = r'''
import importlib.util, json, sys, tempfile
from pathlib import Path
source = Path("advisor/clock_events.py").read_text(encoding="utf-8")
old = 'ReasonRow(ClockEventReason.BOARD_LIMIT, "Board limit", "board"),'
assert source.count(old) == 1
new = ('ReasonRow(ClockEventReason.BOARD_LIMIT, "Board limit", "board", None, "board limit", "board_limit", "power",'
       ' slowdown=True, colour="green", lane=5, verdict_rank=5),')
path = Path(tempfile.mkdtemp()) / "clock_events.py"
path.write_text(source.replace(old, new), encoding="utf-8")
spec = importlib.util.spec_from_file_location("advisor.clock_events", path)
module = importlib.util.module_from_spec(spec)
sys.modules["advisor.clock_events"] = module
spec.loader.exec_module(module)
import advisor
advisor.clock_events = module
from advisor.causes import CAUSE_BITS, CAUSE_FAMILY, CAUSE_LABELS, SLOWDOWN_CAUSES
from advisor.clock_events import POWER_REASONS, THROTTLE_REASONS, ClockEventReason
from desktop.telemetry.metric_names import VIOLATION_COUNTERS
from desktop.ui.pages.dashboard_panel import LANE_REASONS
from desktop.ui.theme import REASON_COLOURS
board = ClockEventReason.BOARD_LIMIT
print(json.dumps({
    "bit": CAUSE_BITS.get("board_limit"), "label": CAUSE_LABELS.get("board_limit"),
    "family": CAUSE_FAMILY.get("board_limit"), "slowdown": "board_limit" in SLOWDOWN_CAUSES,
    "throttle": bool(THROTTLE_REASONS & board), "power": bool(POWER_REASONS & board),
    "lane": LANE_REASONS.index(board) if board in LANE_REASONS else None, "colour": REASON_COLOURS.get(board),
    "violations": [list(fields) for _name, _help, fields in VIOLATION_COUNTERS],
}))
'''


def test_a_new_cause_is_a_row_every_reader_picks_up() -> None:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", _NEW_CAUSE_CHILD], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "bit": 0x200, "label": "board limit", "family": "power", "slowdown": True, "throttle": True, "power": True,
        "lane": 5, "colour": "#009E73",  # Okabe-Ito green
        # No counter: the exporter's violation counters are unchanged.
        "violations": [["clock_event_sw_power_cap_s", "clock_event_hw_power_brake_s"],
                       ["clock_event_sw_thermal_s", "clock_event_hw_thermal_s"]],
    }
