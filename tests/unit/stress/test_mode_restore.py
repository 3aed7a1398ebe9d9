"""Firmware mode files written in place only, and the mode found put back or the command to do it said."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from desktop.stress.mode_restore import STATE_NAME, ModeKeeper, restore_left_over
from desktop.stress.per_mode import ModeFileRefused, SimulatedModes, SysfsModes, write_mode_file
from desktop.telemetry.envelope import EnvelopeReader
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list


def _tree(tmp_path: Path, found: str = "comfort") -> tuple[Path, Path]:
    """A fake msi-ec tree: (its sysfs root, its shift_mode)."""
    root = tmp_path / "sys"
    ec = root / "devices" / "platform" / "msi-ec"
    ec.mkdir(parents=True)
    (ec / "available_shift_modes").write_text("eco\ncomfort\nturbo\n")
    (ec / "shift_mode").write_text(found + "\n")
    return root, ec / "shift_mode"


def _reader(root: Path, tmp_path: Path) -> EnvelopeReader:
    return EnvelopeReader(root, tmp_path / "proc", [])


def test_a_symlinked_mode_file_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path)
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    shift_mode.unlink()
    shift_mode.symlink_to(target)
    with pytest.raises(ModeFileRefused, match="is a symbolic link"):
        SysfsModes(_reader(root, tmp_path), allow_write=True)
    with pytest.raises(ModeFileRefused, match="is a symbolic link"):
        write_mode_file(shift_mode, root, "turbo")
    assert target.read_text() == "root:x:0:0\n"  # write_text would have truncated it and written "turbo"
    assert SysfsModes(_reader(root, tmp_path)).set("turbo") is False  # read-only: never written, never refused


def test_a_mode_folder_linked_out_of_the_sysfs_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _root, shift_mode = _tree(outside)
    root = tmp_path / "sys"
    (root / "devices" / "platform").mkdir(parents=True)
    (root / "devices" / "platform" / "msi-ec").symlink_to(shift_mode.parent)
    with pytest.raises(ModeFileRefused, match="outside the sysfs root"):
        SysfsModes(_reader(root, tmp_path), allow_write=True)
    with pytest.raises(ModeFileRefused, match="outside the sysfs root"):
        write_mode_file(root / "devices" / "platform" / "msi-ec" / "shift_mode", root, "turbo")
    assert shift_mode.read_text() == "comfort\n"


def test_a_mode_is_written_in_place_without_a_tail(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path, "comfort")
    inode = shift_mode.stat().st_ino
    modes = SysfsModes(_reader(root, tmp_path), allow_write=True)
    assert modes.set("eco") and shift_mode.read_text() == "eco\n" and shift_mode.stat().st_ino == inode
    fifo = tmp_path / "sys" / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ModeFileRefused, match="is a FIFO"):
        write_mode_file(fifo, root, "eco")


def test_a_mode_that_cannot_be_written_back_says_the_command(tmp_path: Path) -> None:
    """Without --switch-modes the user switched when asked; at the end Rigscope may not write: it says how."""
    root, shift_mode = _tree(tmp_path, "comfort")
    said: list[str] = []
    keeper = ModeKeeper(SysfsModes(_reader(root, tmp_path)), say=said.append, state_folder=tmp_path / "state")
    assert keeper.remember() == "comfort"
    assert json.loads((tmp_path / "state" / STATE_NAME).read_text())["may_write"] is False
    shift_mode.write_text("eco\n")  # what the user did in MSI Center
    try:
        assert keeper.restore() is False
    finally:
        keeper.close()
    assert said == [f"could not restore firmware mode Balanced (msi-ec comfort); to restore it, run: "
                    f"echo comfort | sudo tee {shift_mode} >/dev/null"]
    assert shift_mode.read_text() == "eco\n"  # not written: --switch-modes was not given
    assert not (tmp_path / "state" / STATE_NAME).exists()  # told once: nothing for the next start


def test_a_killed_run_that_was_not_allowed_to_write_is_reminded_once(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path, "comfort")
    keeper = ModeKeeper(SysfsModes(_reader(root, tmp_path)), say=print, state_folder=tmp_path / "state")
    keeper.remember()
    keeper.close()  # the run was killed here: its lock died with it, its state stayed
    shift_mode.write_text("eco\n")  # switched by hand when asked
    said: list[str] = []
    assert restore_left_over(said.append, folder=tmp_path / "state") is False
    assert shift_mode.read_text() == "eco\n"
    assert said == [f"firmware mode Eco is still in force where a run that ended without restoring it "
                    f"(pid {os.getpid()}) found Balanced; to restore it, run: "
                    f"echo comfort | sudo tee {shift_mode} >/dev/null"]
    assert restore_left_over(said.append, folder=tmp_path / "state") is None and len(said) == 1


def test_a_killed_run_that_switched_is_restored_at_the_next_start(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path, "comfort")
    modes = SysfsModes(_reader(root, tmp_path), allow_write=True)
    keeper = ModeKeeper(modes, say=print, state_folder=tmp_path / "state")
    keeper.remember()
    assert modes.set("eco")
    keeper.close()  # killed: no restore
    said: list[str] = []
    assert restore_left_over(said.append, folder=tmp_path / "state") is True
    assert shift_mode.read_text() == "comfort\n" and not (tmp_path / "state" / STATE_NAME).exists()
    assert said == [f"restored firmware mode Balanced (a run that ended without restoring it, pid {os.getpid()}, "
                    "had switched it)"]


def test_a_left_over_state_that_cannot_be_restored_is_kept_with_the_command(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path, "turbo")
    state = tmp_path / "state"
    state.mkdir()
    (state / STATE_NAME).write_text(json.dumps({"kind": "msi-ec", "mode": "eco", "file": str(shift_mode),
                                                "sysfs_root": str(root), "pid": 4321, "since_s": 0.0}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("turbo\n")
    shift_mode.unlink()
    shift_mode.symlink_to(elsewhere)  # planted after the crash: never written through
    said: list[str] = []
    assert restore_left_over(said.append, folder=state) is False
    assert elsewhere.read_text() == "turbo\n" and (state / STATE_NAME).exists()
    assert len(said) == 1 and said[0].startswith("could not restore firmware mode Eco that an earlier run left")
    assert said[0].endswith(f"to restore it, run: echo eco | sudo tee {shift_mode} >/dev/null")
    shift_mode.unlink()
    shift_mode.write_text("eco\n")  # put back by hand meanwhile: the state goes, nothing to say
    said.clear()
    assert restore_left_over(said.append, folder=state) is True
    assert said == [] and not (state / STATE_NAME).exists()
    (state / STATE_NAME).write_bytes(b"\xff{not json")
    said.clear()
    assert restore_left_over(said.append, folder=state) is None  # unreadable: said once, removed
    assert len(said) == 1 and not (state / STATE_NAME).exists()


def test_the_simulated_laptop_follows_a_fake_msi_ec_file(tmp_path: Path) -> None:
    root, shift_mode = _tree(tmp_path, "eco")
    machine = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad()).machine
    machine.follow_mode_file(shift_mode)
    assert machine.devices()[0].power_limit_enforced_w == 80.0
    write_mode_file(shift_mode, root, "turbo")
    assert machine.power_envelope().msi_shift_mode == "turbo" and machine.devices()[0].power_limit_enforced_w == 175.0
    shift_mode.write_text("sport\n")  # a mode this laptop does not have: the EC refuses it, the mode stays
    assert machine.power_envelope().msi_shift_mode == "turbo"


def test_a_simulated_mode_needs_no_state_file(tmp_path: Path) -> None:
    machine = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad()).machine
    said: list[str] = []
    keeper = ModeKeeper(SimulatedModes(machine), say=said.append, state_folder=tmp_path / "state")
    assert keeper.remember() == "comfort"
    machine.set_envelope(shift_mode="eco")
    assert keeper.restore() is True and keeper.restore() is True  # the second does nothing
    keeper.close()
    assert said == ["restored firmware mode Balanced"] and machine.envelope_state.shift_mode == "comfort"
    assert not (tmp_path / "state").exists()  # the model dies with the process: nothing to keep
