"""The simulated KVM host: 82599 PFs, VFs passed to guests, workloads (SimHost in vftune.sim.host)."""
