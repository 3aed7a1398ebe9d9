"""`rigscope stress -o FILE --price-per-hour X --baseline FILE --max-drop PCT`: the portable record
of the run and the CI regression gate.

Everything the options can get wrong is checked before the run (a missing or damaged baseline,
an unwritable output, a baseline of another workload): exit 2 then costs no test time. After the
run the record is written and the gate judges the sustained throughput against the baseline's.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.safetext import printable
from desktop.cli.common import check_output, load_settings
from desktop.errors import UserError

if TYPE_CHECKING:
    from advisor.portable import PortableRecord
    from advisor.verdict_model import Verdict
    from desktop.stress.run_model import RunResult

#: Exit code of a run whose throughput fell more than --max-drop below the baseline's.
EXIT_BELOW_BASELINE = 5
#: --max-drop when only --baseline is given: the history's own regression threshold.
DEFAULT_MAX_DROP_PCT = 5.0


@dataclass(frozen=True)
class Gate:
    """The gate's answer: the run's and the baseline's sustained throughput and the drop between them."""

    throughput: float | None
    baseline: float
    unit: str
    max_drop_pct: float
    #: How far below the baseline the run is, in %; negative when above; None when it measured nothing.
    drop_pct: float | None

    @property
    def failed(self) -> bool:
        return self.drop_pct is None or self.drop_pct > self.max_drop_pct

    @property
    def sentence(self) -> str:
        from advisor.compare_text import number

        allowed = f"allowed {self.max_drop_pct:g} %"
        base = f"the baseline's {number(self.baseline, self.unit)}"
        if self.throughput is None or self.drop_pct is None:
            return f"no sustained throughput was measured to hold against {base} ({allowed})"
        side = "below" if self.drop_pct >= 0 else "above"
        return (f"throughput {number(self.throughput, self.unit)} is {abs(self.drop_pct):.1f} % {side} {base} "
                f"({allowed})")

    def as_dict(self) -> dict[str, object]:
        """The gate in `--json`: every number finite (JSON has no Infinity)."""
        from advisor.portable import finite_json

        data: dict[str, object] = finite_json({
            "throughput": self.throughput, "baseline": self.baseline, "unit": self.unit, "drop_pct": self.drop_pct,
            "max_drop_pct": self.max_drop_pct, "passed": not self.failed, "sentence": self.sentence})
        return data


def judge_gate(record: PortableRecord, baseline: PortableRecord, max_drop_pct: float) -> Gate:
    """The run's sustained throughput against the baseline record's (same unit, checked by ``prepare``)."""
    assert baseline.throughput is not None
    current = record.throughput
    drop = None if current is None else (1.0 - current / baseline.throughput) * 100.0
    return Gate(current, baseline.throughput, baseline.unit or record.unit or "", max_drop_pct, drop)


@dataclass(frozen=True)
class RecordOptions:
    """The checked options: where to write the record, the price, the baseline and the allowed drop."""

    output: Path | None = None
    price_per_hour: float | None = None
    currency: str | None = None
    baseline: PortableRecord | None = None
    max_drop_pct: float = DEFAULT_MAX_DROP_PCT

    @property
    def wanted(self) -> bool:
        return self.output is not None or self.baseline is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`rigscope stress`'s options for the portable record and the gate."""
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="also write the run as a portable record (JSON) for `rigscope compare` or --baseline")
    parser.add_argument("--price-per-hour", type=float, default=None, metavar="X",
                        help="what an hour of this machine costs (in Settings' currency): the record then has cost "
                             "per work")
    parser.add_argument("--baseline", metavar="FILE",
                        help="a record from an earlier `stress -o`: exit 5 when throughput falls more than "
                             "--max-drop below it")
    parser.add_argument("--max-drop", type=float, default=None, metavar="PCT",
                        help=f"with --baseline: the drop allowed, in %% (default {DEFAULT_MAX_DROP_PCT:g})")


def prepare(args: argparse.Namespace) -> RecordOptions:
    """Check -o, --price-per-hour, --baseline and --max-drop before the run (UserError: exit 2)."""
    output = getattr(args, "output", None)
    price = getattr(args, "price_per_hour", None)
    baseline_path = getattr(args, "baseline", None)
    max_drop = getattr(args, "max_drop", None)
    out_path = None
    if output is not None:
        if output in ("", "-"):
            raise UserError("-o needs a file name (the record is JSON; the report still goes to the terminal)")
        out_path = Path(output)
        check_output(out_path, "run.json")
    if price is not None and not (math.isfinite(price) and price >= 0):
        raise UserError(f"--price-per-hour must be a price of zero or more, not {price:g}")
    if max_drop is not None:
        if baseline_path is None:
            raise UserError("--max-drop needs --baseline FILE: the record to hold the run against")
        if not (math.isfinite(max_drop) and 0 <= max_drop < 100):
            raise UserError(f"--max-drop is a percentage from 0 to below 100, not {max_drop:g}")
    baseline = _read_baseline(baseline_path, args.workload) if baseline_path is not None else None
    currency = load_settings()[0].costs.currency if price is not None else None
    return RecordOptions(out_path, price, currency, baseline,
                         max_drop if max_drop is not None else DEFAULT_MAX_DROP_PCT)


def _read_baseline(path: str, workload: str) -> PortableRecord:
    """The ``--baseline`` record, refused now when it cannot be held against a ``workload`` stress run."""
    from desktop.stress.portable import read_record

    baseline = read_record(Path(path))
    shown = printable(path)
    if baseline.kind != "stress" or baseline.workload != workload:
        raise UserError(f"the baseline {shown} is a {baseline.kind} run of {printable(baseline.workload)}; "
                        f"this is a {workload} stress run: use --workload {printable(baseline.workload)} "
                        "or a baseline of the same workload")
    if baseline.throughput is None or baseline.throughput <= 0:
        raise UserError(f"the baseline {shown} has no sustained throughput to hold this run against")
    if not baseline.unit:  # found only after the run otherwise ("measured None"): minutes for nothing
        raise UserError(f"the baseline {shown} does not say what its throughput measures (no "
                        '"throughput.unit"): it cannot be held against this run')
    return baseline


@dataclass(frozen=True)
class Outcome:
    """After the run: the record, the gate (when a baseline was given), and why the file was not written."""

    record: PortableRecord
    gate: Gate | None = None
    write_error: str | None = None
    #: A note on what differs from the baseline (unit, precision), said beside the gate.
    warning: str | None = None


def finish(options: RecordOptions, result: RunResult, verdict: Verdict) -> Outcome:
    """Build the record, write it to -o, and judge it against the baseline."""
    from desktop.stress.portable import record_from_stress, write_record

    record = record_from_stress(result, verdict, price_per_hour=options.price_per_hour, currency=options.currency)
    write_error = None
    if options.output is not None:
        try:
            write_record(options.output, record)
        except OSError as exc:
            write_error = f"the record was not written to {printable(options.output)}: {exc.strerror or exc}"
    gate, warning = None, None
    baseline = options.baseline
    if baseline is not None:
        if record.unit is not None and baseline.unit != record.unit:
            raise UserError(f"the baseline measured {printable(baseline.unit)} and this run {record.unit}: "
                            "they cannot be compared")
        if baseline.dtype and record.dtype and baseline.dtype != record.dtype:
            warning = (f"the baseline ran {printable(baseline.dtype)} and this run {record.dtype}: "
                       "pass --dtype to compare like with like")
        gate = judge_gate(record, baseline, options.max_drop_pct)
    return Outcome(record, gate, write_error, warning)


def exit_code(code: int, outcome: Outcome | None, *, not_saved: int) -> int:
    """The run's exit code with the gate and the record file: wrong results (3) and an aborted run (4)
    stay; a failed gate is 5 over every other; a record that could not be written is 6 like an unsaved run."""
    if outcome is None or code in (3, 4):
        return code
    if outcome.gate is not None and outcome.gate.failed:
        return EXIT_BELOW_BASELINE
    if outcome.write_error is not None:
        return not_saved
    return code


def add_to_json(report: dict[str, object], options: RecordOptions, outcome: Outcome | None) -> dict[str, object]:
    """`--json`: the record file and the gate beside the report (absent keys: the options were not given)."""
    if outcome is None:
        return report
    if options.output is not None:
        report["record_file"] = str(options.output) if outcome.write_error is None else None
        report["record_error"] = outcome.write_error
    if outcome.gate is not None:
        report["gate"] = {**outcome.gate.as_dict(), "warning": outcome.warning}
    return report


def text_lines(options: RecordOptions, outcome: Outcome | None) -> str:
    """The lines the text report gains: where the record went, and the gate's answer."""
    if outcome is None:
        return ""
    lines = []
    if options.output is not None and outcome.write_error is None:
        lines.append(f"Record written to {printable(options.output)} (compare it: rigscope compare A.json B.json).")
    if outcome.gate is not None:
        word = "FAILED" if outcome.gate.failed else "passed"
        lines.append(f"Baseline gate {word}: {outcome.gate.sentence}.")
    return "".join("\n" + line for line in lines)


def say_problems(outcome: Outcome | None) -> None:
    """On stderr: a record that could not be written, a baseline of another precision, a failed gate."""
    if outcome is None:
        return
    if outcome.write_error is not None:
        print(f"rigscope stress: {outcome.write_error}", file=sys.stderr)
    if outcome.warning is not None:
        print(f"rigscope stress: {outcome.warning}", file=sys.stderr)
    if outcome.gate is not None and outcome.gate.failed:
        print(f"rigscope stress: {outcome.gate.sentence}", file=sys.stderr)
