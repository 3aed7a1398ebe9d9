"""The job's rate as `rigscope run` reads it: its output streams and the progress file it may write.

A job says how far it got in its output (a tqdm bar, ``it/s`` in a log line) or, told the file's path in
``PROGRESS_ENV``, in lines ``{"items": N, "unit": "..."}`` there. The parsers are the pure advisor.progress's;
this keeps one per stream, reads the file from where it stopped, and makes the job's throughput series.
"""

from __future__ import annotations

from pathlib import Path

from advisor.progress import JobSeries, OutputProgress, ProtocolProgress, throughput_series


class JobProgress:
    """What the job's output and its progress file at ``path`` (None: none) said so far."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.output = {1: OutputProgress(), 2: OutputProgress()}
        self.protocol = ProtocolProgress()
        #: Whether the job's last output on each stream left a line unfinished (a tqdm bar).
        self.line_open = {1: False, 2: False}
        self._protocol_at = 0

    def on_output(self, stream: int, chunk: bytes, time_s: float) -> None:
        """A chunk the job wrote on ``stream`` (1, 2) at ``time_s``, as the wrapper passed it on."""
        self.output[stream].feed(chunk, time_s)
        self.line_open[stream] = not chunk.endswith(b"\n")

    def read_file(self, now: float) -> None:
        """What the job added to its progress file since the last read (1 MiB at most a read)."""
        if self.path is None:
            return
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._protocol_at)
                data = handle.read(1 << 20)
        except OSError:
            return
        self._protocol_at += len(data)
        if data:
            try:
                self.protocol.feed(data, now)
            except Exception:  # the parser is bounded; should it still fail, the line is lost, never the run
                self.protocol.bad_lines += 1

    def finish(self, end: float) -> int:
        """At the job's end (``end``): the last of its output and its file taken; how many lines of the file were
        skipped (not a progress line)."""
        for parser in self.output.values():
            parser.finish(end)
        self.read_file(end)
        self.protocol.finish(end)
        return self.protocol.bad_lines

    def series(self, time_s: list[float], pauses: list[tuple[float, float]]) -> tuple[JobSeries, str | None]:
        """The job's throughput at the sample times ``time_s`` (paused spans apart), and its unit (None: it said
        no rate)."""
        rates = sorted((r for p in self.output.values() for r in p.readings), key=lambda r: r.time_s)
        return throughput_series(time_s, rates, self.protocol.readings, pauses)
