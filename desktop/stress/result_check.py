"""Comparing a workload's whole result with what it must be: how many elements differ, and in which output tiles.

gpu-burn's way: the same computation on the same inputs gives the same result on healthy hardware,
so each check compares every element of the result with the first one (or, where the weights move,
with the same forward pass run again); a float64 reference of a corner says the first one was right.
A fault confined to one SM shows as wrong elements in the tiles that SM computed; a check of one
corner (one thread block) never saw it.

Also the tolerance per dtype, and ``corrupt_one``, the fault ``--inject-faults`` plants before each
check. Works on torch tensors through their own methods only: ``stress/workloads.py`` stays the one
module that imports torch (and this one is testable without it on anything tensor-like).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

#: Rows and columns of an output tile: the 128 x 128 block one thread block (on one SM) computes in
#: cuBLAS's common GEMM kernels. The SM a tile ran on is the scheduler's choice and cannot be read
#: back; tiles are what a report can name.
TILE: Final = 128
#: Tiles listed in a report (the count says how many there were).
MAX_TILES_LISTED: Final = 16
#: Largest |result - reference| allowed, relative to the largest |reference|, per dtype.
TOLERANCE = {"bf16": 5e-2, "fp16": 1e-2, "tf32": 1e-2, "fp32": 1e-4}


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Elements of one check that differed, and the output tiles (tile row, tile column) they fall in."""

    elements: int
    checked: int
    tile_count: int
    tiles: tuple[tuple[int, int], ...]
    tile_size: int = TILE

    def record(self) -> dict[str, Any]:
        """The progress record's ``mismatch`` entry."""
        return {"elements": self.elements, "checked": self.checked, "tile_size": self.tile_size,
                "tile_count": self.tile_count, "tiles": [list(t) for t in self.tiles]}


def mismatch_mask(result: Any, expected: Any, tolerance: float) -> Any:
    """Boolean tensor: where ``result`` differs from ``expected`` by more than ``tolerance`` x max |expected|,
    or is not finite (both tensors of one shape; compared in float32, or float64 where either is)."""
    wide = result.double() if "float64" in (str(result.dtype), str(expected.dtype)) else result.float()
    exp = expected.to(wide.dtype)
    scale = float(exp.abs().max()) or 1.0
    bad = (wide - exp).abs() > tolerance * scale
    return bad | ~wide.isfinite()


def as_matrix(tensor: Any) -> Any:
    """A result viewed as rows x columns: a (batch, seq, width) activation is (batch x seq) x width."""
    if tensor.dim() == 1:
        return tensor.reshape(1, -1)
    return tensor.reshape(-1, tensor.shape[-1])


def summarize(bad: Any, tile: int = TILE) -> Mismatch:
    """Count the True elements of a boolean (rows x columns) tensor and name the tiles holding them."""
    matrix = as_matrix(bad)
    elements = int(matrix.sum())
    checked = int(matrix.numel())
    if elements == 0:
        return Mismatch(0, checked, 0, (), tile)
    rows, cols = int(matrix.shape[0]), int(matrix.shape[1])
    tile_rows, tile_cols = -(-rows // tile), -(-cols // tile)
    padded = matrix.new_zeros((tile_rows * tile, tile_cols * tile))
    padded[:rows, :cols] = matrix
    # Per tile: any wrong element in it (a tile_rows x tile_cols grid, small: 64 x 64 at N = 8192).
    grid = padded.reshape(tile_rows, tile, tile_cols, tile).any(3).any(1)
    where = [(int(r), int(c)) for r, c in grid.nonzero().tolist()]
    return Mismatch(elements, checked, len(where), tuple(where[:MAX_TILES_LISTED]), tile)


def corrupt_one(result: Any, rng: random.Random) -> tuple[int, ...]:
    """Add 1000 to one element of ``result`` at a random place (``--inject-faults``); its index."""
    index = tuple(rng.randrange(size) for size in result.shape)
    result[index] += 1000.0
    return index
