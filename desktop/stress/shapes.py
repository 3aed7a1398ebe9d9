"""The workloads' sizes for a GPU: the train/infer block's shape, the GEMM's N, the bandwidth buffers' elements.

The block's width, sequence and batch come from the SM count and free memory; the GEMM and the
bandwidth buffers from free memory alone.

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


#: Bandwidth buffers hold int32 element indices: exact for every element a buffer can have here.
MAX_BANDWIDTH_ELEMENTS = 2**31 - 1


def gemm_edge(free_bytes: int, element_bytes: int) -> int:
    """Square GEMM size on a GPU with ``free_bytes`` free: A, B and C in 30 % of it, a multiple of 256
    from 1024 up to 8192 (gpu-burn's cap)."""
    n = int((free_bytes * 0.3 / (3 * element_bytes)) ** 0.5)
    return max(1024, min(8192, n // 256 * 256))


def bandwidth_elements(size: int, free_bytes: int | None) -> int:
    """Elements of each bandwidth buffer: ``size`` when given, else a quarter of a GPU's ``free_bytes`` (at most
    2 GiB) over two int32 buffers, or 16 Mi on the CPU (``free_bytes`` None); ValueError outside 1 to
    ``MAX_BANDWIDTH_ELEMENTS``."""
    if size:
        count = size
    elif free_bytes is not None:
        count = int(min(free_bytes * 0.25, 2 * 1024**3) / 2 / 4)
    else:
        count = 16 * 1024 * 1024
    if not 0 < count <= MAX_BANDWIDTH_ELEMENTS:
        raise ValueError(f"the bandwidth buffer takes 1 to {MAX_BANDWIDTH_ELEMENTS} elements, not {count}")
    return count
