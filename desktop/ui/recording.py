"""The window's names for its recording (desktop/sessions/recording.py owns it, for `rigscope record` too).

If no recorder service holds the database's writer lock, the window takes it and records; if the
service holds it, the window reads the database and says so in the status bar; if the database cannot
be opened at all, the window still works live, unrecorded. The window's side is its Qt timers
(desktop/ui/app.py: the status line, the calibrations) and its sampler thread, which calls ``submit``.
"""

from __future__ import annotations

from desktop.sessions.recording import (
    STALL_AFTER_S,
    Mode,
    RecordingSession,
    SettingsMaintenance,
    stalled_since,
)

#: The window's recording: the session itself.
Recording = RecordingSession
#: Open the window's recording (a writer, or reading, or nothing, and why).
open_recording = RecordingSession.open

__all__ = ["STALL_AFTER_S", "Mode", "Recording", "SettingsMaintenance", "open_recording", "stalled_since"]
