"""Train/infer are sized to the GPU: a datacenter GPU gets enough rows per SM to be loaded, not the CPU."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from desktop.stress.workloads import ACTIVATION_SHARE, block_shape

GIB = 1024**3


def test_an_h200_gets_a_wide_block_and_hundreds_of_rows_per_sm() -> None:
    width, seq, batch = block_shape(132, 140 * GIB, train=True)  # H200: 132 SMs, ~140 GiB free
    assert width == 4096 and seq == 512
    assert batch * seq >= 132 * 256  # the old 8 x 128 = 1,024 tokens were ~8 per SM
    infer_width, _seq, infer_batch = block_shape(132, 140 * GIB, train=False)
    assert infer_width == 4096 and 1 < infer_batch < batch


def test_a_laptop_gpu_keeps_a_block_it_can_hold() -> None:
    width, seq, batch = block_shape(36, 7 * GIB, train=True)  # RTX 4070 Laptop: 36 SMs, 8 GiB
    assert width == 1024
    bytes_per_token = width * 64 + (width // 64) * seq * 8
    assert batch * seq * bytes_per_token <= ACTIVATION_SHARE * 7 * GIB
    assert block_shape(36, 7 * GIB, train=False)[2] >= 1


def test_little_free_memory_caps_the_batch_and_never_goes_below_one() -> None:
    roomy = block_shape(132, 140 * GIB, train=True)[2]
    tight = block_shape(132, 8 * GIB, train=True)[2]
    assert 1 <= tight < roomy
    assert block_shape(132, 1024, train=True)[2] == 1


def test_the_cpu_and_an_explicit_width_are_kept() -> None:
    assert block_shape(None, None, train=True) == (128, 32, 4)
    assert block_shape(None, None, train=False) == (128, 32, 1)
    assert block_shape(132, 140 * GIB, train=True, width=64)[0] == 64
