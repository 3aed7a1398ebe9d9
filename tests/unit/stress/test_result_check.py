"""The whole-result check: one wrong element anywhere in C (or in a block's output) is counted and its tile named.

torch stays out of the test process: the workloads run in a child (test_workloads_exact.in_child).
"""

from __future__ import annotations

import random

import pytest

from tests.unit.stress.test_workloads_exact import in_child, needs_torch


@needs_torch
def test_gemm_finds_one_corrupted_element_in_a_random_tile_anywhere_in_c() -> None:
    # N = 320: a 3 x 3 grid of 128-element tiles, the last row and column of tiles partial. One element
    # per trial in every tile, at a random place in it, far outside the float64 corner (32 x 256) mostly.
    seed = random.randrange(2**32)
    found = in_child(f"""
        import json, random, torch
        torch.set_num_threads(2)
        from desktop.stress.workloads import Gemm
        rng = random.Random({seed})
        gemm = Gemm(torch.device("cpu"), "fp32", 320, False)
        gemm.step()
        out = {{"first": gemm.check(), "trials": []}}
        for tile_row in range(3):
            for tile_col in range(3):
                gemm.step()  # C again, from the same inputs
                row = rng.randrange(tile_row * 128, min(320, tile_row * 128 + 128))
                col = rng.randrange(tile_col * 128, min(320, tile_col * 128 + 128))
                gemm.c[row, col] += 0.5  # about a tenth of the largest element: a silent wrong value
                errors = gemm.check()
                out["trials"].append([row, col, errors, gemm.mismatch.record() if gemm.mismatch else None])
                gemm.mismatch = None
        gemm.step()
        out["clean"] = gemm.check()
        print(json.dumps(out))
    """)
    assert found["first"] == 0 and found["clean"] == 0, f"seed {seed}"
    for row, col, errors, mismatch in found["trials"]:
        assert errors == 1, f"seed {seed}: C[{row}, {col}]"
        assert mismatch == {"elements": 1, "checked": 320 * 320, "tile_size": 128, "tile_count": 1,
                            "tiles": [[row // 128, col // 128]]}, f"seed {seed}"


@needs_torch
def test_gemm_counts_an_element_wrong_in_the_corner_once() -> None:
    errors = in_child("""
        import json, torch
        from desktop.stress.workloads import Gemm
        gemm = Gemm(torch.device("cpu"), "fp32", 256, False)
        gemm.step()
        first = gemm.check()
        gemm.step()
        gemm.c[3, 5] = float("nan")  # wrong against both the first C and the float64 corner
        print(json.dumps([first, gemm.check(), gemm.mismatch.record()["tiles"]]))
    """)
    assert errors == [0, 1, [[0, 0]]]


@needs_torch
@pytest.mark.parametrize("workload", ["train", "infer"])
def test_a_block_finds_one_wrong_output_element_anywhere_in_the_batch(workload: str) -> None:
    # A forward hook adds 1000 to one element of the full batch's output (not the 8 tokens the float64
    # reference covers) on the check after the first: a fault in one tile of the last layer's output.
    seed = random.randrange(2**32)
    found = in_child(f"""
        import json, random, torch
        torch.set_num_threads(2)
        from desktop.stress.workloads import WORKLOADS
        rng = random.Random({seed})
        block = WORKLOADS["{workload}"](torch.device("cpu"), "fp32", 256, False)
        block.step()
        first = block.check()
        block.step()
        full = tuple(block.x.shape)
        where = (rng.randrange(full[0]), rng.randrange(8, full[1]), rng.randrange(full[2]))
        armed = [True]
        def corrupt(module, args, output):
            if armed[0] and tuple(output.shape) == full:
                armed[0] = False
                output = output.clone()
                output[where] += 1000.0
                return output
        block.model.register_forward_hook(corrupt)
        errors = block.check()
        print(json.dumps({{"first": first, "errors": errors, "where": where, "seq": full[1],
                          "mismatch": block.mismatch.record() if block.mismatch else None}}))
    """)
    batch, token, column = found["where"]
    row = batch * found["seq"] + token
    assert found["first"] == 0, f"seed {seed}"
    assert found["errors"] == 1, f"seed {seed}: {found}"
    assert found["mismatch"]["tiles"] == [[row // 128, column // 128]], f"seed {seed}"


@needs_torch
def test_injected_faults_land_anywhere_and_each_is_reported_with_its_tile() -> None:
    records = in_child("""
        import json, torch
        from desktop.stress.workloads import Gemm
        gemm = Gemm(torch.device("cpu"), "fp32", 512, True)
        out = []
        for _ in range(6):
            gemm.step()
            errors = gemm.check()
            out.append([errors, gemm.mismatch.record()])
        print(json.dumps(out))
    """)
    assert all(errors == 1 and m["tile_count"] == 1 and m["elements"] == 1 for errors, m in records)
