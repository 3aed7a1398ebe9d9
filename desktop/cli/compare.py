"""`rigscope compare A.json B.json [...] [--json]`: run records from different machines side by side.

The first record is the reference: throughput, latency, work-per-joule and cost ratios are
against it, and the environment facts that explain a gap (driver, CUDA, torch, precision,
power limit) are flagged when they differ. Exit 0; 2 for a missing, foreign or damaged file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.safetext import printable
from desktop.cli.common import add_json, text_table
from desktop.errors import UserError

if TYPE_CHECKING:
    from advisor.run_compare import Comparison

#: Marks a flagged difference in the text table.
FLAG = "!"


def text_report(comparison: Comparison, names: list[str]) -> str:
    """The table (one column per record, a "!" before flagged differences), then the notes."""
    from advisor.compare_text import flagged_sentence, rows

    header = ("", *(f"{chr(ord('A') + i)}: {r.label}" if i < 26 else r.label
                    for i, r in enumerate(comparison.records)))
    files = ("file", *names)
    table: list[tuple[str, ...]] = [header, files]
    section = "result"
    for row in rows(comparison):
        if row.section != section:
            section = row.section
            table.append(("environment", *("" for _ in row.cells)))
        mark = f"{FLAG} " if row.flagged else ("  " if section == "environment" else "")
        table.append((f"{mark}{row.label}", *row.cells))
    lines = [text_table(table, indent=""), "", printable(flagged_sentence(comparison))]
    lines += [f"Note: {printable(note)}." for note in comparison.notes]
    if comparison.comparable:
        lines.append("Ratios (×) are against A.")
    return "\n".join(lines)


HELP = "compare run records (from `stress -o` / `run -o`) side by side, across machines"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="two or more record files; the first is the reference the ratios are against")
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    from advisor.run_compare import compare
    from desktop.stress.portable import read_records

    paths = [Path(name) for name in args.files]
    if len(paths) < 2:
        raise UserError("compare needs two or more record files "
                        "(from `rigscope stress -o FILE` or `rigscope run -o FILE`)")
    comparison = compare(read_records(paths))
    if args.json:
        data = comparison.as_dict()
        for entry, path in zip(data["records"], paths, strict=True):
            entry["file"] = str(path)
        print(json.dumps(data, indent=2, allow_nan=False))
    else:
        print(text_report(comparison, [str(p) for p in paths]))
    return 0
