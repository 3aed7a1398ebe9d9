"""The import progress bar: drawn on a terminal, silent otherwise."""

from __future__ import annotations

import io

from desktop.history.progress import ProgressBar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_only() -> None:
    terminal = _Terminal()
    bar = ProgressBar(200, "reading gpu.csv", stream=terminal, width=10)
    bar.update(100)
    bar.update(200)
    bar.close()
    text = terminal.getvalue()
    assert "\rreading gpu.csv [#####-----]  50.0%" in text
    assert text.endswith("[##########] 100.0%\n")
    pipe = io.StringIO()
    quiet = ProgressBar(200, "x", stream=pipe)
    quiet.update(200)
    quiet.close()
    assert pipe.getvalue() == ""
