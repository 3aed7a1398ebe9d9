"""tools/device_run.sh, the one command for a lent GPU machine, run here on the simulated GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "device_run.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils timeout")


def _status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def _env(out: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "OUT": str(out), "DEVICE_SIMULATE": "1", "DEVICE_RUN_SHORT": "1",
           "DEVICE_PYTHON": sys.executable, **extra}
    return env


def test_simulated_run_writes_everything_under_out_and_nothing_in_the_tree(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    before = _status()
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT)], check=False, cwd=tmp_path, env=_env(out), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _status() == before
    (recording,) = [p for p in out.iterdir() if p.is_dir()]
    for name in ("doctor.json", "samples.jsonl", "samples-load.jsonl", "stress.json", "run.json"):
        assert (recording / name).stat().st_size > 0, name
    log = (out / "device_run.log").read_text()
    assert "python 3." in log and "import pynvml: ok" in log and "nvidia-smi: skipped (DEVICE_SIMULATE=1)" in log
    for phase in ("before", "after"):
        probe = json.loads((out / f"fields_{phase}.json").read_text())
        assert probe["simulated"] is True and probe["phase"] == phase
        ids = [f["id"] for f in probe["fields"]]
        assert ids == [74, 75, 82, 185, 186, *range(193, 199), *range(251, 274)]
        assert all({"return", "type", "value"} <= f.keys() for f in probe["fields"])
    assert json.loads((recording / "run.json").read_text())["simulated"] is True


def test_python_older_than_3_11_stops_with_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\n"
                    "case \"$2\" in *version_info*) exit 1;; *) echo 'python 3.10.12 (fake)';; esac\n")
    fake.chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT)], check=False, cwd=tmp_path, env=_env(out, DEVICE_PYTHON=str(fake)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = [line for line in done.stdout.splitlines() if line.startswith("device-run: ") and "3.11" in line]
    assert len(lines) == 1 and "older than 3.11" in lines[0]
    assert not list(out.glob("fields_*.json"))
