"""Sustained-load test: torch workloads (child process), the runner and the throttle verdict."""
