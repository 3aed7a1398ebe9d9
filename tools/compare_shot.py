"""The Compare dialog's screenshot for the README: `python -m tools.compare_shot resources/screenshots`.

Two simulated 10-minute GEMM runs on an injected clock (milliseconds of real time): the RTX
4090 Laptop in bf16 and an RTX 4090 desktop in fp16, each written as a portable record (the
desktop one priced at RunPod's 0.69 US$ per hour, ../shared/REFERENCE.md), then compared in
the dialog and grabbed in the dark and light themes. The precision differs, so it is flagged.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication

from advisor.portable import PortableRecord
from desktop.stress.devices import GpuTarget
from desktop.stress.portable import record_from_stress, write_record
from desktop.stress.records import judge_run
from desktop.stress.run_model import SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from desktop.ui.theme import DARK, LIGHT, apply_theme
from desktop.ui.widgets.compare_dialog import CompareDialog

SIZE = (1280, 900)
#: (profile, precision, machine name, price per hour) of each simulated run.
RUNS: tuple[tuple[str, str, str, float | None], ...] = (
    ("rtx4090-laptop", "bf16", "vector-laptop", None),
    ("rtx4090", "fp16", "runpod-4090", 0.69),
)


def simulated_record(profile: str, dtype: str, machine: str, price_per_hour: float | None,
                     duration_s: float = 600.0) -> PortableRecord:
    clock = SimClock()
    backend = SimulatedBackend(parse_profile_list(profile), ManualLoad(), seed=3)
    runner = StressRunner(StressConfig(target=GpuTarget("sim"), dtype=dtype, duration_s=duration_s),
                          Sampler(backend, clock=clock.now), clock=clock)
    result = runner.run()
    return record_from_stress(result, judge_run(result), price_per_hour=price_per_hour,
                              currency="USD" if price_per_hour is not None else None, machine=machine)


def write_demo_records(folder: Path) -> list[Path]:
    paths = []
    for profile, dtype, machine, price in RUNS:
        path = folder / f"{machine}.json"
        write_record(path, simulated_record(profile, dtype, machine, price))
        paths.append(path)
    return paths


def grab(app: QApplication, paths: Sequence[Path], out: Path, theme_name: str = "dark") -> CompareDialog:
    theme = DARK if theme_name == "dark" else LIGHT
    apply_theme(app, theme)
    dialog = CompareDialog(theme)
    dialog.resize(*SIZE)
    dialog.add_files(paths)
    dialog.loader.wait(10.0)
    for _ in range(50):
        app.processEvents()
        if dialog.comparison is not None:
            break
    dialog.show()
    app.processEvents()
    dialog.grab().save(str(out))
    dialog.close()
    return dialog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compare_shot")
    parser.add_argument("folder", type=Path, help="where compare-dark.png and compare-light.png go")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    args.folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_demo_records(Path(tmp))
        for theme in ("dark", "light"):
            grab(app, paths, args.folder / f"compare-{theme}.png", theme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
