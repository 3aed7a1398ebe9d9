"""``JobProgress``: the job's progress file read from where the last read stopped (a line cut by a read is one
line), its output streams' unfinished lines, and the lines that were no progress record counted at the end."""

from __future__ import annotations

from pathlib import Path

from desktop.jobs.job_progress import JobProgress

T0 = 1_800_000_000.0


def test_the_file_is_read_on_from_where_the_last_read_stopped(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    path.write_bytes(b'{"items": 100, "unit": "samples"}\n{"items": 200, "unit": "samples"}\n{"items": 3')
    progress = JobProgress(path)
    progress.read_file(T0 + 1.0)
    assert [r.items for r in progress.protocol.readings] == [100.0, 200.0]  # the cut line waits for its end
    with path.open("ab") as handle:
        handle.write(b'00, "unit": "samples"}\nnot a record\n')
    progress.read_file(T0 + 2.0)
    assert [r.items for r in progress.protocol.readings] == [100.0, 200.0, 300.0]  # read once, whole
    with path.open("ab") as handle:
        handle.write(b'{"items": 400, "unit": "samples"}')  # the last line, never ended by a newline
    assert progress.finish(T0 + 3.0) == 1  # the line that was no record
    assert [r.items for r in progress.protocol.readings] == [100.0, 200.0, 300.0, 400.0]


def test_no_file_nothing_read_and_a_missing_one_is_no_error(tmp_path: Path) -> None:
    none = JobProgress(None)
    none.read_file(T0)
    missing = JobProgress(tmp_path / "never-written.jsonl")
    missing.read_file(T0)
    assert none.finish(T0) == 0 and missing.finish(T0) == 0
    assert not none.protocol.readings and not missing.protocol.readings


def test_an_unfinished_output_line_is_known_per_stream() -> None:
    progress = JobProgress(None)
    progress.on_output(2, b"epoch 1:  40%|####      | 40/100 [00:04<00:06, 10.00it/s]\r", T0)
    progress.on_output(1, b"loading data\n", T0)
    assert progress.line_open == {1: False, 2: True}  # the card starts on a line of its own after the bar
    progress.on_output(2, b"done\n", T0 + 1.0)
    assert progress.line_open == {1: False, 2: False}
