"""Issue 34 items 5 and 7: hostile sysfs/proc files neither block, nor fill memory, nor read as values."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.telemetry.envelope import EnvelopeReader

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
REPO = Path(__file__).resolve().parents[3]
_CHILD = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # /dev/zero read whole: MemoryError, not a full machine
from desktop.telemetry.envelope import EnvelopeReader
root = Path(sys.argv[1])
env = EnvelopeReader(root / "sys", root / "proc", [root / "units"]).read()
print(repr(env.msi_shift_modes), repr(env.platform_profile), repr(env.msi_fan_modes), env.battery_pct)
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "case"
    shutil.copytree(FIXTURES / "on_battery", root, symlinks=True)
    return root


@pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform == "darwin", reason="POSIX FIFOs, RLIMIT_AS")
def test_a_fifo_dev_zero_and_a_huge_file_in_the_tree_do_not_block_or_fill_memory(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    ec = root / "sys" / "devices" / "platform" / "msi-ec"
    (ec / "available_shift_modes").unlink()
    (ec / "available_shift_modes").symlink_to("/dev/zero")
    (ec / "available_fan_modes").unlink()
    with (ec / "available_fan_modes").open("wb") as huge:  # 2 GiB, sparse: costs no disk
        huge.truncate(2 << 30)
    acpi = root / "sys" / "firmware" / "acpi"
    acpi.mkdir(parents=True, exist_ok=True)
    profile = acpi / "platform_profile"
    if profile.exists():
        profile.unlink()
    os.mkfifo(profile)  # no writer: a plain open() waits for one for ever
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(root)], capture_output=True, text=True,
                              env=env, check=False, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the envelope reader blocked on the FIFO")
    assert done.returncode == 0, done.stderr[-2000:]
    # Each hostile file reads as nothing (or a page's worth of NUL-free words: none); the rest is intact.
    assert done.stdout.split() == ["()", "None", "()", "64.0"]


@pytest.mark.parametrize(("online", "on_ac"), [("-5", None), ("7", None), ("nan", None), ("0", None), ("1", True)])
def test_power_supply_online_reads_only_the_abis_values(tmp_path: Path, online: str, on_ac: bool | None) -> None:
    """-5 read as offline: a laptop on battery by its supply's word, though the battery says otherwise."""
    root = _tree(tmp_path)
    supplies = root / "sys" / "class" / "power_supply"
    for supply in supplies.iterdir():
        if (supply / "type").read_text().strip() == "Battery":
            (supply / "status").write_text("Unknown\n")  # no fallback: the supply alone decides
        elif (supply / "online").exists():
            (supply / "online").write_text(online + "\n")
    read = EnvelopeReader(root / "sys", root / "proc", [root / "units"]).read()
    assert read.on_ac is (False if online == "0" else on_ac)


@pytest.mark.parametrize("fan", ["1e308", "-3", "101", "inf"])
def test_a_fan_speed_outside_0_to_100_percent_is_missing(tmp_path: Path, fan: str) -> None:
    root = _tree(tmp_path)
    ec = root / "sys" / "devices" / "platform" / "msi-ec"
    (ec / "cpu" / "realtime_fan_speed").write_text(fan + "\n")
    (ec / "gpu" / "realtime_fan_speed").write_text("55\n")
    read = EnvelopeReader(root / "sys", root / "proc", [root / "units"]).read()
    assert (read.cpu_fan_pct, read.gpu_fan_pct) == (None, 55.0)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_as_proc_meminfo_does_not_block_the_host_sampler(tmp_path: Path) -> None:
    """The recorder's sampling path reads /proc/meminfo each tick: a FIFO there must not stop it."""
    import threading

    from desktop.telemetry.host import swap_bytes

    fifo = tmp_path / "meminfo"
    os.mkfifo(fifo)
    answer: list[tuple[int, int]] = []
    reader = threading.Thread(target=lambda: answer.append(swap_bytes(fifo)))
    reader.start()
    reader.join(30.0)
    if reader.is_alive():  # blocked in open(): give it a writer so the thread ends, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        reader.join(10.0)
        pytest.fail("swap_bytes blocked on a FIFO")
    assert len(answer) == 1 and answer[0][0] >= 0  # psutil's own answer, as for a file without Swap lines
