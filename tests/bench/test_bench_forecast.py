"""Measurement: the Quick test's temperature forecast against where the 10-minute runs and the fixture logs settle.

Prints tools/forecast_error.py's table (issue 32 item 8): each run cut to its first 2 minutes of load,
forecast, and compared with the mean of its last minute; runs held at their slowdown temperature compare
the forecast time to the slowdown with the measured one. Deterministic; asserts only that each row was
measured, not how well (the figures go in the note and the README).
"""

from __future__ import annotations

from tools.forecast_error import log_rows, simulated_rows, table


def test_bench_forecast_error_table() -> None:
    rows = simulated_rows() + log_rows()
    print()
    print(table(rows))
    assert len(rows) >= 8 and all(r.forecast_c is not None for r in rows)
