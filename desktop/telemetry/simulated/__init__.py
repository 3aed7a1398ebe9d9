"""A simulated GPU with a thermal/power model, for machines without an NVIDIA driver.

The load comes from a scenario (``ManualLoad`` for the stress test and the window's simulated
workloads, ``scenarios.WeekScenario`` for demo history); one ``SimulatedMachine`` holds the model
and its load, shared by every ``SimulatedBackend`` that reads it. Inside: ``profiles`` (the
simulated cards), ``load`` (demand and scenarios),
``physics`` (the model), ``backend`` (the GpuBackend over it) and ``shared`` (the loads every
process of this user puts on "the" simulated GPU, one file each); their public names are
gathered here.
"""

from desktop.telemetry.simulated.backend import SimulatedBackend, SimulatedMachine
from desktop.telemetry.simulated.load import (
    WORKLOADS,
    Demand,
    ManualLoad,
    ProcessDetail,
    Scenario,
    Workload,
    combine,
    simulated_host_sample,
)
from desktop.telemetry.simulated.physics import SimulatedGpuModel, Trace
from desktop.telemetry.simulated.profiles import (
    AMBIENT_C,
    DEFAULT_PROFILE,
    GpuProfile,
    load_profiles,
    parse_profile_list,
    profile_info,
)
from desktop.telemetry.simulated.shared import SharedEntry, SharedLoads

__all__ = [
    "AMBIENT_C",
    "DEFAULT_PROFILE",
    "WORKLOADS",
    "Demand",
    "GpuProfile",
    "ManualLoad",
    "ProcessDetail",
    "Scenario",
    "SharedEntry",
    "SharedLoads",
    "SimulatedBackend",
    "SimulatedGpuModel",
    "SimulatedMachine",
    "Trace",
    "Workload",
    "combine",
    "load_profiles",
    "parse_profile_list",
    "profile_info",
    "simulated_host_sample",
]
