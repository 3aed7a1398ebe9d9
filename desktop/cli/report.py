"""`rigscope report`: the weekly summary as HTML, PDF (Qt's PDF writer), JSON or CSV."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from desktop.advice import open_history
from desktop.cli.common import db_path, load_settings
from desktop.errors import UserError
from desktop.reporting import SystemLocalTime, build_report, load_week, to_csv, to_json
from desktop.safetext import printable


def check_output(path: Path) -> None:
    """Say why a report cannot be written to ``path`` before rendering it: Qt's PDF writer fails
    silently (a folder given as the file, a folder that does not exist), and rendering takes seconds."""
    if path.is_dir():
        raise UserError(f"cannot write {printable(path)}: it is a folder; give a file name such as "
                        f"{printable(path / 'report.pdf')}")
    if not path.parent.is_dir():
        raise UserError(f"cannot write {printable(path)}: the folder {printable(path.parent)} does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"cannot write {printable(path)}: no permission to write there")


def main(args: argparse.Namespace) -> int:
    fmt = args.format
    output = Path(args.output).expanduser()
    check_output(output)
    settings, _problems = load_settings()
    tz = SystemLocalTime()
    store = open_history(db_path(args))
    try:
        label, frame, previous, notes = load_week(store, args.week, tz, args.now_s)
    finally:
        store.close()
    data = build_report(frame, previous, settings, tz, label, now_s=args.now_s, notes=notes)
    try:
        if fmt == "json":
            output.write_text(to_json(data), encoding="utf-8")
        elif fmt == "csv":
            output.write_text(to_csv(data), encoding="utf-8")
        else:  # the charts and the HTML/PDF rendering are Qt's: imported only for these formats
            from desktop.ui.reports import render_charts, to_html, write_pdf

            pngs = render_charts(data)
            if fmt == "html":
                output.write_text(to_html(data, pngs), encoding="utf-8")
            else:
                pages = write_pdf(data, pngs, output)
                if not output.is_file() or output.stat().st_size == 0:
                    raise UserError(f"could not write the PDF to {printable(output)} (Qt's PDF writer gave no file: "
                                    "a full disk, or the file is open in another program?)")
                print(f"{pages} page(s)")
    except OSError as exc:
        raise UserError(f"cannot write {printable(output)}: {exc.strerror or exc}") from exc
    print(f"wrote {printable(output)} ({label}, {fmt})")
    return 0
