"""The train/infer transformer block's shape for a GPU: width, sequence and batch from its SM count and free memory.

Plain arithmetic (no torch), so the sizing is tested without the workloads' child process.
"""

from __future__ import annotations

#: Tokens per train step per SM: enough rows that every SM has GEMM tiles to work on. The old fixed
#: 8 x 128 tokens at width 1024 left an H100/H200 (132 SMs) waiting on the CPU's kernel launches, so
#: steps/s measured the host, not the GPU.
TRAIN_TOKENS_PER_SM = 512
#: Infer keeps small batches (serving latency) but a datacenter GPU still gets rows for its SMs.
INFER_TOKENS_PER_SM = 64
#: Of the free memory, what the activations of one step may take (the rest: weights, AdamW, the allocator).
ACTIVATION_SHARE = 0.3


def block_shape(sm_count: int | None, free_bytes: int | None, *, train: bool,
                width: int = 0) -> tuple[int, int, int]:
    """(width, seq, batch) of the train/infer block for a GPU with ``sm_count`` SMs and ``free_bytes`` free.

    ``sm_count=None`` is the CPU: the small block. On a GPU the width grows with the SM count (1024
    up to 47 SMs, 2048 up to 99, 4096 beyond: an H100's FFN GEMMs are then 4096 x 16384), the
    sequence is 512 and the batch gives ``TRAIN_TOKENS_PER_SM`` (train) or ``INFER_TOKENS_PER_SM``
    (infer, at least batch 1) tokens per SM, capped so that one step's activations (~64 bytes a
    token per width unit plus the attention scores) stay within ``ACTIVATION_SHARE`` of free memory.
    """
    if sm_count is None:
        return width or 128, 32, 4 if train else 1
    width = width or (1024 if sm_count < 48 else 2048 if sm_count < 100 else 4096)
    seq = 512
    tokens = sm_count * (TRAIN_TOKENS_PER_SM if train else INFER_TOKENS_PER_SM)
    heads = max(1, width // 64)
    bytes_per_token = width * 64 + heads * seq * 4 * (2 if train else 1)
    if free_bytes:
        tokens = min(tokens, int(free_bytes * ACTIVATION_SHARE / bytes_per_token))
    batch = max(1, tokens // seq)
    return width, seq, batch
