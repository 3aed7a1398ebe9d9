"""The packaging files pass their own validators: desktop-file-validate, appstreamcli, systemd-analyze."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from desktop import service
from tests.integration.tools import require_tool

pytestmark = pytest.mark.integration


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def test_desktop_entry_is_valid(repo_root: Path) -> None:
    tool = require_tool("desktop-file-validate", "desktop-file-utils")
    entry = repo_root / "packaging/linux/rigscope.desktop"
    result = run([tool, str(entry)])
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
    assert re.search(r"^Exec=rigscope$", entry.read_text(), re.M)


def test_appstream_metainfo_is_valid(repo_root: Path) -> None:
    tool = require_tool("appstreamcli", "appstream")
    metainfo = repo_root / "packaging/linux/io.github.rigscope.Rigscope.metainfo.xml"
    result = run([tool, "validate", "--no-net", str(metainfo)])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Errors (E:) and warnings (W:) fail; infos are allowed (appstream 0.16 does not know
    # <developer>, which 1.0 requires).
    assert not re.search(r"^[EW]:", output, re.M), output
    root = ET.parse(metainfo).getroot()
    assert root.findtext("launchable") == "rigscope.desktop"
    assert (repo_root / "packaging/linux" / root.findtext("launchable", "")).exists()


def test_metainfo_and_metadata_name_no_placeholder_urls(repo_root: Path) -> None:
    """Real URLs or none: the metainfo and pyproject named https://example.invalid/rigscope, which software
    centres and PyPI would show as links. Every URL left must be https and not a reserved example domain."""
    texts = [(repo_root / "packaging/linux/io.github.rigscope.Rigscope.metainfo.xml").read_text(),
             (repo_root / "pyproject.toml").read_text()]
    for text in texts:
        for url in re.findall(r"https?://[^\s\"'<>]+", text):
            host = url.split("/")[2]
            assert url.startswith("https://") and not re.search(r"(^|\.)(example|invalid|test|localhost)(\.|$)",
                                                                  host), url


def _verify(tool: str, unit: Path, tmp_path: Path, home: Path | None = None) -> str:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    # A user manager needs a runtime dir; none exists in CI containers. %h is $HOME.
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), **({"HOME": str(home)} if home is not None else {})}
    result = run([tool, "--user", "verify", str(unit)], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_shipped_systemd_unit_verifies(repo_root: Path, tmp_path: Path) -> None:
    """The shipped unit, unchanged, verifies where pipx put `rigscope` (~/.local/bin; a stub stands in for it
    under a temporary home): it used to run /usr/bin/rigscope, which pip and pipx never create."""
    tool = require_tool("systemd-analyze", "systemd")
    home = tmp_path / "home"
    stub = home / ".local" / "bin" / "rigscope"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    unit = repo_root / "packaging/systemd" / service.UNIT_NAME
    assert _verify(tool, unit, tmp_path, home=home) == ""


def test_installed_systemd_unit_verifies(tmp_path: Path) -> None:
    """The unit `rigscope service install` writes, with this interpreter's real path, verifies as is."""
    tool = require_tool("systemd-analyze", "systemd")
    unit = tmp_path / service.UNIT_NAME
    unit.write_text(service.render_unit(service.recorder_command()))
    assert _verify(tool, unit, tmp_path) == ""


def test_systemd_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a missing executable is reported."""
    tool = require_tool("systemd-analyze", "systemd")
    unit = tmp_path / service.UNIT_NAME
    unit.write_text(service.render_unit([str(tmp_path / "missing" / "rigscope"), "record"]))
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    result = run([tool, "--user", "verify", str(unit)], env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert result.returncode != 0 and "is not executable" in result.stdout + result.stderr


def test_icon_is_a_plain_svg(repo_root: Path) -> None:
    root = ET.parse(repo_root / "resources/rigscope.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") == "0 0 128 128"


def test_pyinstaller_spec_leaves_torch_out_and_ships_resources(repo_root: Path) -> None:
    """The spec is valid Python naming the GUI entry point, torch excluded and resources/ bundled
    (building the bundle itself takes minutes and PyInstaller; see docs/windows.md)."""
    import ast

    spec = (repo_root / "packaging/pyinstaller/rigscope.spec").read_text()
    tree = ast.parse(spec)
    calls = {node.func.id: node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    analysis = calls["Analysis"]
    keywords = {k.arg: k.value for k in analysis.keywords}
    excludes = ast.literal_eval(keywords["excludes"])
    assert "torch" in excludes
    assert "'desktop/resources'" in ast.unparse(keywords["datas"])
    assert "__main__.py" in ast.unparse(analysis.args[0])
    assert (repo_root / "desktop/__main__.py").exists()


@pytest.mark.slow
def test_building_the_package_prints_no_setuptools_warning(repo_root: Path, tmp_path: Path) -> None:
    """`pip install -e .` printed ~100 lines of setuptools warnings (the license as a TOML table, the
    screenshots folder as an unlisted package); the build of a copy of the sources prints none."""
    import importlib.util
    import shutil
    import sys

    src = tmp_path / "src"
    for name in ("desktop", "advisor", "resources", "packaging"):
        shutil.copytree(repo_root / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(repo_root / name, src / name)
    # Offline with this environment's setuptools where it has one (>= 77 for the SPDX license).
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-v", "--wheel-dir",
                str(tmp_path / "dist"), str(src)], cwd=src)
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    warnings = [line for line in output.splitlines() if ("warning" in line.lower() and "setuptools" in line.lower())
                or "is absent from the `packages`" in line or "deprecated" in line.lower()]
    assert warnings == [], "\n".join(warnings)
