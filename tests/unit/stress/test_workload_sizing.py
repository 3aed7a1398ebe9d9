"""Train/infer are sized to the GPU: a datacenter GPU gets enough rows per SM to be loaded, not the CPU.

``desktop.stress.workloads`` imports torch, which stays out of the test process (as out of the GUI: the
Stress page's tests check it), so each check runs in a child Python.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
REPO = Path(__file__).resolve().parents[3]


def _in_child(check: str) -> None:
    code = ("from desktop.stress.shapes import ACTIVATION_SHARE, block_shape\nGIB = 1024**3\n"
            + textwrap.dedent(check) + "\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_an_h200_gets_a_wide_block_and_hundreds_of_rows_per_sm() -> None:
    _in_child("""
        width, seq, batch = block_shape(132, 140 * GIB, train=True)  # H200: 132 SMs, ~140 GiB free
        assert width == 4096 and seq == 512
        assert batch * seq >= 132 * 256  # the old 8 x 128 = 1,024 tokens were ~8 per SM
        infer_width, _seq, infer_batch = block_shape(132, 140 * GIB, train=False)
        assert infer_width == 4096 and 1 < infer_batch < batch
    """)


def test_a_laptop_gpu_keeps_a_block_it_can_hold() -> None:
    _in_child("""
        width, seq, batch = block_shape(36, 7 * GIB, train=True)  # RTX 4070 Laptop: 36 SMs, 8 GiB
        assert width == 1024
        bytes_per_token = width * 64 + (width // 64) * seq * 8
        assert batch * seq * bytes_per_token <= ACTIVATION_SHARE * 7 * GIB
        assert block_shape(36, 7 * GIB, train=False)[2] >= 1
    """)


def test_little_free_memory_caps_the_batch_and_never_goes_below_one() -> None:
    _in_child("""
        roomy = block_shape(132, 140 * GIB, train=True)[2]
        tight = block_shape(132, 8 * GIB, train=True)[2]
        assert 1 <= tight < roomy
        assert block_shape(132, 1024, train=True)[2] == 1
    """)


def test_the_cpu_and_an_explicit_width_are_kept() -> None:
    _in_child("""
        assert block_shape(None, None, train=True) == (128, 32, 4)
        assert block_shape(None, None, train=False) == (128, 32, 1)
        assert block_shape(132, 140 * GIB, train=True, width=64)[0] == 64
    """)


def test_the_test_process_stays_without_torch() -> None:
    assert "torch" not in sys.modules
