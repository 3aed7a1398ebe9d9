"""`rigscope report`: the weekly summary as HTML, PDF (Qt's PDF writer), JSON or CSV.

The format follows the output's extension (``-o week.pdf``); ``--format`` is needed only for a
name without one of the four, and one that disagrees with the extension is refused. ``-o -``
writes HTML, JSON or CSV to standard output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from advisor.safetext import printable
from desktop.cli.common import STDOUT, add_db, check_output, db_path, load_settings
from desktop.errors import UserError

FORMATS = ("html", "pdf", "json", "csv")
#: A file name's extension -> the format it means.
EXTENSIONS = {".html": "html", ".htm": "html", ".pdf": "pdf", ".json": "json", ".csv": "csv"}


def report_format(output: str, given: str | None) -> str:
    """The format for ``-o output``: the extension's, ``--format``'s when they agree or there is no
    known extension, else html; a UserError when they disagree or a PDF is asked on standard output."""
    if output == STDOUT:
        fmt = given or "html"
        if fmt == "pdf":
            raise UserError("a PDF cannot go to standard output (-o -): give a file name such as week.pdf")
        return fmt
    implied = EXTENSIONS.get(Path(output).suffix.lower())
    if given is not None and implied is not None and given != implied:
        raise UserError(f"--format {given} disagrees with the file name {printable(output)} ({implied}): "
                        f"drop --format, or name the file ….{given}")
    return given or implied or "html"


HELP = "write the weekly summary as HTML, PDF, JSON or CSV"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the last full week)")
    parser.add_argument("--format", choices=("html", "pdf", "json", "csv"), default=None,
                        help="output format (default: from the file's extension, else html)")
    parser.add_argument("-o", "--output", metavar="FILE", required=True,
                        help="the file to write (week.pdf, week.html, week.json, week.csv); - for standard output")
    add_db(parser)


def main(args: argparse.Namespace) -> int:
    from desktop.advice import open_history
    from desktop.report_output import to_csv, to_json, write_report_text
    from desktop.report_week import SystemLocalTime, load_week
    from desktop.reporting import build_report, load_usage_rows

    fmt = report_format(args.output, args.format)
    to_stdout = args.output == STDOUT
    output = Path(args.output).expanduser()
    if not to_stdout:
        check_output(output, f"report.{fmt}")
    settings, _problems = load_settings()
    tz = SystemLocalTime()
    store = open_history(db_path(args))
    try:
        label, frame, previous, notes = load_week(store, args.week, tz, args.now_s)
        usage_rows = load_usage_rows(store, frame)
    finally:
        store.close()
    data = build_report(frame, previous, settings, tz, label, now_s=args.now_s, notes=notes, usage_rows=usage_rows)
    pages = 0
    try:
        if fmt == "json":
            text = to_json(data)
        elif fmt == "csv":
            text = to_csv(data)
        else:  # the charts and the HTML/PDF rendering are Qt's: imported only for these formats
            from desktop.ui.report.reports import render_charts, to_html, write_pdf

            pngs = render_charts(data)
            if fmt == "html":
                text = to_html(data, pngs)
            else:  # written beside the target and renamed over it, as the text formats below
                pages = write_pdf(data, pngs, output)
        if to_stdout:
            if sys.stdout is None:  # started with standard output closed (``>&-``)
                raise UserError("standard output is closed: give -o FILE to write the report to a file")
            sys.stdout.write(text)
            sys.stdout.flush()
            return 0
        if fmt != "pdf":  # a temporary file beside it, renamed: a full disk keeps the old report whole
            write_report_text(output, text)
    except BrokenPipeError:  # `rigscope report -o - | head`: handled as a normal end by the dispatch
        raise
    except OSError as exc:
        raise UserError(f"cannot write {'to standard output' if to_stdout else printable(output)}: "
                        f"{exc.strerror or exc}") from exc
    size = f", {pages} page{'s' if pages != 1 else ''}" if pages else ""
    print(f"wrote {printable(output)} ({label}, {fmt}{size})", file=sys.stderr)  # status, as export says it
    return 0
