"""What a job run under `rigscope run` is: ``JobRecord``, ``GuardEvent`` (its throughput over time,
``JobSeries``, is the pure ``advisor.progress``'s: imported from there).

Defined in desktop/history/job_model.py (the history layer stores and returns them, and may not import
this package); this is the name everything above the history imports them by.
"""

from desktop.history.job_model import GuardEvent, GuardEventKind, JobRecord

__all__ = ["GuardEvent", "GuardEventKind", "JobRecord"]
