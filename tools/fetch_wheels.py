"""Fetch the few pure-Python packages the GPU machine's own python3 lacks, for `make device-check` offline.

Run it where there is network (``python3 tools/fetch_wheels.py``): it downloads each wheel with
pip (``pip download --no-deps --only-binary=:all:``, pure-Python ``py3-none-any`` wheels only) and
unpacks it into ``.device-deps/`` at the repository root, a folder that ignores itself in git and
that tools/device_check.py puts on ``PYTHONPATH``. Nothing is installed and no venv is made; carry
the folder to the GPU machine with the checkout. numpy, psutil, nvidia-ml-py and torch are not
fetched: they are compiled and come with that machine's Python (the issue's H200: Python 3.12 with
torch 2.11+cu130, nvidia-ml-py, psutil and numpy).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEST = REPO_ROOT / ".device-deps"
#: What `rigscope doctor|sample|stress` import beyond the GPU machine's packages (checked by running
#: them under a bare python3 with only numpy, psutil and nvidia-ml-py: platformdirs alone).
WHEELS = ("platformdirs>=4",)

Download = Callable[[Sequence[str], Path], None]


def pip_download(specs: Sequence[str], into: Path) -> None:
    """``pip download`` the pure-Python wheels of ``specs`` (no dependencies, no source builds) into ``into``."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--dest", str(into), *specs], check=True)


def unpack(wheel: Path, dest: Path) -> None:
    """Unpack one pure-Python wheel into ``dest`` (a wheel is a zip of its import tree)."""
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"fetch_wheels: {wheel.name} is not a pure-Python wheel: install it on the GPU machine")
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            target = (dest / member).resolve()
            if not target.is_relative_to(dest.resolve()):
                raise SystemExit(f"fetch_wheels: {wheel.name} has a path outside the folder: {member}")
        archive.extractall(dest)


def fetch(dest: Path = DEST, specs: Sequence[str] = WHEELS, download: Download = pip_download) -> list[str]:
    """Replace ``dest`` with the unpacked wheels of ``specs``; returns the wheel file names."""
    with tempfile.TemporaryDirectory(prefix="rigscope-wheels-") as tmp:
        wheels_dir = Path(tmp)
        download(specs, wheels_dir)
        wheels = sorted(wheels_dir.glob("*.whl"))
        if len(wheels) < len(specs):
            raise SystemExit(f"fetch_wheels: pip gave {len(wheels)} wheels for {len(specs)} packages")
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        (dest / ".gitignore").write_text("# unpacked by tools/fetch_wheels.py: not source\n*\n", encoding="utf-8")
        for wheel in wheels:
            unpack(wheel, dest)
        return [w.name for w in wheels]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fetch_wheels", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dest", type=Path, default=DEST, help=f"where to unpack (default {DEST.name}/)")
    args = parser.parse_args(argv)
    names = fetch(args.dest)
    print(f"fetch_wheels: {', '.join(names)} unpacked into {args.dest}", file=sys.stderr)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
