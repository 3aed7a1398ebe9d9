"""Test helper: the demo week stored by the real `rigscope demo` code (desktop.history.demo), built once per run.

It ends at the end of ISO week 2026-W47 (UTC) and starts a day earlier, so the week is
complete and the week before has a day of history ("against the previous week").
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from desktop.history.demo import write_demo
from desktop.telemetry.simulated import parse_profile_list
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S

DEMO_WEEK_END_S = DEMO_WEEK_START_S + 7 * 86400


@functools.cache
def stored_demo_week(profiles: str = "rtx4090-laptop") -> Path:
    """A read-only-by-convention demo database (about 10-30 s to build; shared by the test modules)."""
    folder = Path(tempfile.mkdtemp(prefix="rigscope-demo-db-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "demo-history.sqlite"
    write_demo(path, parse_profile_list(profiles), days=8, now_s=DEMO_WEEK_END_S)
    return path
