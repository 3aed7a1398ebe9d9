"""What a job run under `rigscope run` is: ``JobRecord``, ``JobSeries``, ``GuardEvent``.

Defined in desktop/history/job_model.py (the history layer stores and returns them, and may not import
this package); this is the name everything above the history imports them by.
"""

from desktop.history.job_model import FloatArray, GuardEvent, GuardEventKind, JobRecord, JobSeries

__all__ = ["FloatArray", "GuardEvent", "GuardEventKind", "JobRecord", "JobSeries"]
