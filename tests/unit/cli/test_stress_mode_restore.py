"""`rigscope stress --per-mode --switch-modes` leaves the firmware mode as it found it (issue 34 item 1).

Each test runs the real command as a child process over a fake msi-ec tree (``RIGSCOPE_SYSFS_ROOT``):
the simulated laptop follows its ``shift_mode`` as a real EC does, so the file is what gets switched
and put back: at the end, on SIGINT (Ctrl+C) and SIGTERM, and after SIGKILL at the next start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.stress.mode_restore import STATE_NAME, restore_left_over
from tests.waits import DEADLINE_S, read_when, until

MODES = ("eco", "comfort", "turbo")


def _fake_msi_ec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, found: str) -> Path:
    """A fake msi-ec tree in ``found`` mode as the child's (and this process's) sysfs root; its shift_mode."""
    ec = tmp_path / "sys" / "devices" / "platform" / "msi-ec"
    ec.mkdir(parents=True)
    (ec / "available_shift_modes").write_text("".join(m + "\n" for m in MODES))
    (ec / "shift_mode").write_text(found + "\n")
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(tmp_path / "sys"))
    return ec / "shift_mode"


def _state_file() -> Path:
    return Path(os.environ["RIGSCOPE_STATE_DIR"]) / STATE_NAME


def _stress(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    """The command as a child; its stdout and stderr go to files (a pipe nobody reads could stall it)."""
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        return subprocess.Popen([sys.executable, "-m", "desktop", "stress", "--device", "sim",
                                 "--db", str(tmp_path / "h.sqlite"), *args],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err)


def _ended(proc: subprocess.Popen[bytes], tmp_path: Path) -> tuple[str, str]:
    """Wait for the child (killed if it outlives the deadline); its stdout and stderr."""
    try:
        proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (tmp_path / "out").read_text(), (tmp_path / "err").read_text()


def _mode(path: Path) -> str:
    """The mode as msi-ec's readers take it: the first word (a longer old value's tail may be there for an instant
    between the write and the cut of a plain file; sysfs has none)."""
    words = path.read_text().split()
    return words[0] if words else ""


def test_a_per_mode_run_puts_back_the_mode_it_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shift_mode = _fake_msi_ec(tmp_path, monkeypatch, "eco")
    inode = shift_mode.stat().st_ino
    proc = _stress(tmp_path, "--per-mode", "turbo,comfort", "--switch-modes", "--minutes", "0.05", "--json")
    seen: list[str] = []
    while proc.poll() is None:  # what the file holds while the child runs: the modes it switched, in turn
        mode = _mode(shift_mode)
        if mode and (not seen or seen[-1] != mode):
            seen.append(mode)
        time.sleep(0.005)  # a poll interval (each mode holds for seconds), leaving the cores to the child
    out, err = _ended(proc, tmp_path)
    assert proc.returncode == 0, err
    assert _mode(shift_mode) == "eco" and shift_mode.read_text() == "eco\n"  # as found, nothing left behind
    assert shift_mode.stat().st_ino == inode  # written in place, never replaced
    assert seen == ["eco", "turbo", "comfort", "eco"]
    assert "rigscope stress: restored firmware mode Eco" in err.splitlines()
    # The runs were in the modes the file held: the simulated laptop follows it as the EC does.
    assert [m["power_limit_line"] for m in json.loads(out)["modes"]] == [
        "at its rated power (175 W)", "capped at 150 W of 175 W: firmware mode Balanced"]
    assert not _state_file().exists()  # removed once restored


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_per_mode_run_puts_back_the_mode_it_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             signum: signal.Signals) -> None:
    shift_mode = _fake_msi_ec(tmp_path, monkeypatch, "comfort")
    proc = _stress(tmp_path, "--per-mode", "turbo,eco", "--switch-modes", "--minutes", "5")
    try:
        until(lambda: _mode(shift_mode) == "turbo")  # the first mode is switched: its run is under way
        proc.send_signal(signum)
    finally:
        _out, err = _ended(proc, tmp_path)
    assert proc.returncode == 4, err  # aborted, as a stopped stress run is
    assert shift_mode.read_text() == "comfort\n"
    assert "rigscope stress: restored firmware mode Balanced" in err.splitlines()
    assert "running Eco" not in err  # no further mode was switched after the stop
    assert not _state_file().exists()


def test_after_a_crash_the_next_start_restores_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shift_mode = _fake_msi_ec(tmp_path, monkeypatch, "comfort")
    proc = _stress(tmp_path, "--per-mode", "eco,turbo", "--switch-modes", "--minutes", "5")
    try:
        until(lambda: _mode(shift_mode) == "eco")
        state = read_when(_state_file(), json.loads)  # kept before the first switch
        assert (state["mode"], state["kind"], state["pid"]) == ("comfort", "msi-ec", proc.pid)
        said: list[str] = []
        assert restore_left_over(said.append) is None  # the run is alive: its mode is its own to put back
        assert said == [] and _mode(shift_mode) == "eco"
        proc.kill()
    finally:
        _ended(proc, tmp_path)
    assert _mode(shift_mode) == "eco" and _state_file().exists()  # what a crash leaves
    # The next start (any `rigscope stress`) puts it back before it measures anything, and says so.
    after = subprocess.run([sys.executable, "-m", "desktop", "stress", "--device", "sim", "--minutes", "0.02",
                            "--db", str(tmp_path / "h.sqlite"), "--json"],
                           capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert shift_mode.read_text() == "comfort\n"
    restored = [line for line in after.stderr.splitlines() if "restored firmware mode" in line]
    assert restored == [f"rigscope stress: restored firmware mode Balanced (a run that ended without restoring it, "
                        f"pid {proc.pid}, had switched it)"]
    assert after.returncode != 2, after.stderr
    assert not _state_file().exists()


def test_a_symlinked_mode_file_is_refused_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shift_mode = _fake_msi_ec(tmp_path, monkeypatch, "comfort")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("comfort\n")
    shift_mode.unlink()
    shift_mode.symlink_to(elsewhere)
    result = subprocess.run([sys.executable, "-m", "desktop", "stress", "--device", "sim", "--per-mode", "turbo,eco",
                             "--switch-modes", "--minutes", "0.05", "--db", str(tmp_path / "h.sqlite")],
                            capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"rigscope stress: {shift_mode} is a symbolic link (to {elsewhere})")
    assert elsewhere.read_text() == "comfort\n" and shift_mode.is_symlink()
    assert not _state_file().exists()


@pytest.mark.skipif(sys.platform == "win32", reason="a terminal from the pty module")
def test_without_switch_modes_the_user_is_asked_and_given_the_command_back(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """No --switch-modes: Rigscope asks on the terminal, never writes, and at the end prints the command that
    puts the mode found back; run as printed (less sudo, as root here or in a test) it does."""
    import pty
    import shlex

    shift_mode = _fake_msi_ec(tmp_path, monkeypatch, "comfort")
    controller, terminal = pty.openpty()
    try:
        with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "desktop", "stress", "--device", "sim", "--per-mode",
                                     "turbo,eco", "--minutes", "0.05", "--db", str(tmp_path / "h.sqlite")],
                                    stdin=terminal, stdout=out, stderr=err)
        try:
            for mode, name in (("turbo", "Extreme Performance"), ("eco", "Eco")):
                prompt = f"Switch the firmware to {name} (msi-ec {mode}) now, then press Enter"
                until(lambda p=prompt: p in (tmp_path / "err").read_text())  # asked: waiting on the terminal
                shift_mode.write_text(mode + "\n")  # the user switches in MSI Center
                os.write(controller, b"\n")
        finally:
            _out, err_text = _ended(proc, tmp_path)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 0, err_text
    command = f"echo comfort | sudo tee {shift_mode} >/dev/null"
    said = f"rigscope stress: could not restore firmware mode Balanced (msi-ec comfort); to restore it, run: {command}"
    assert said in err_text.splitlines()
    assert shift_mode.read_text() == "eco\n" and not _state_file().exists()  # never written by Rigscope; told once
    assert shlex.split(command)[3] == "sudo"
    subprocess.run(["sh", "-c", command.replace("| sudo ", "| ", 1)], check=True)  # as printed, less sudo
    assert shift_mode.read_text() == "comfort\n"
