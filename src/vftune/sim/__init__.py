"""The simulated KVM host: 82599 PFs, VFs passed to guests, workloads (SimHost in vftune.sim.host)."""

# The simulated host `vftune run --sim` runs when no scenario is named (the Quickstart's demo):
# 17 VFs on two ports, bulk, UDP, request/response and idle, and one VF no guest holds. Kept
# here, beside the catalogue, and light: the CLI reads it on every run, a real host's included,
# without importing the simulator.
DEMO_SCENARIO = "mixed-host"
