"""Sessions: one object per use case (a stress test, your own job, recording), owning the whole
sequence from the request to the outcome (locks, device mapping, runner or wrapper, earlier runs,
judging, saving, the exit code) and reporting progress through plain callbacks.

The command line (``desktop.cli``) and the window (``desktop.ui``) are thin adapters over them:
the CLI prints what a session reports, the Qt workers turn it into signals. A session imports the
services below it (stress, jobs, recorder, history, telemetry) and never Qt.
"""
