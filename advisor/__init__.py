"""Pure analysis of logged history: statistics, workload profile, rules, costs and summaries.

No Qt, pynvml, psutil, torch, SQL or I/O here: everything arrives as a HistoryFrame.
"""
