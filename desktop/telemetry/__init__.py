"""Telemetry: the data model, the NVML/host/simulated backends and the sampler."""
