"""`rigscope record --prometheus` over the fake NVML, whose one GPU lists a real process (issue 20).

Usage: hostile_recorder_child.py PID DB PORT. The fake driver reports process PID on the GPU; the
sampler names it from /proc as the real program would, so a prctl name with non-UTF-8 bytes
reaches the writer and the exporter exactly as it would on a real machine.
"""

from __future__ import annotations

import sys

from tests.fakes.fake_pynvml import FakeNvml, FakeProcess, desktop_gpu


def main() -> int:
    pid, db, port = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    fake = FakeNvml([desktop_gpu(processes=[FakeProcess(pid, sm_util=40)])])
    sys.modules["pynvml"] = fake.module
    from desktop.cli import main as cli_main

    return cli_main(["record", "--db", db, "--interval", "0.2", "--prometheus", "--listen", f"127.0.0.1:{port}"])


if __name__ == "__main__":
    sys.exit(main())
