"""`rigscope` / `rigscope gui`: open the window (the window itself is desktop/ui)."""

from __future__ import annotations

import argparse

from desktop.cli.common import add_db, add_simulate, db_path, load_settings, open_backend
from desktop.errors import UserError

HELP = "open the window (the default)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_simulate(parser)
    add_db(parser)


def main(args: argparse.Namespace) -> int:
    import os

    from desktop.cli import COMMANDS
    from desktop.telemetry.sampler import Sampler, open_host_backend
    from desktop.ui import platform_check

    # Qt aborts the process (exit 134) without a display or when its platform plugin cannot load; say why.
    if platform_check.needs_display(os.environ):
        others = ", ".join(name for name in COMMANDS if name not in ("gui", "menu"))
        raise UserError("the window needs a display (DISPLAY and WAYLAND_DISPLAY are unset: over SSH use ssh -X, "
                        f"or run it in your desktop session); these commands work without one: {others} "
                        "(rigscope COMMAND --help)")
    if (problem := platform_check.xcb_problem()) is not None:
        raise UserError(problem)
    backend = open_backend(getattr(args, "simulate", None))
    settings, problems = load_settings()
    sampler = Sampler(backend, open_host_backend(), process_period_s=settings.sampling.process_interval_s)
    path = db_path(args)
    from desktop.ui.launch import run_window

    return run_window(sampler, settings, path, problems)
