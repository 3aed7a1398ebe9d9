"""`rigscope record` over the fake NVML whose driver can fail and come back (issue 32): a real recorder process.

Usage: no_driver_recorder_child.py DB SWITCH_FILE. The fake reads SWITCH_FILE at every ``nvmlInit``
(``{"init_error": 18 | null, "driver_version": "..."}``), so the test makes NVML fail with "driver/library
version mismatch" and answer again while the recorder runs. NVML is tried again every second here (the
command's own 60 s would make the test wait a minute); everything else is the real command.
"""

from __future__ import annotations

import sys

from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu


def main() -> int:
    db, switch = sys.argv[1], sys.argv[2]
    fake = FakeNvml([desktop_gpu()], switch_file=switch)
    sys.modules["pynvml"] = fake.module
    from desktop.telemetry import no_gpu

    no_gpu.NVML_RETRY_PERIOD_S = 1.0
    from desktop.cli import main as cli_main

    return cli_main(["record", "--db", db, "--interval", "0.2"])


if __name__ == "__main__":
    sys.exit(main())
