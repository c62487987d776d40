"""The side-by-side benchmark: every simulator scenario with every ITR policy, in simulated time."""

from vftune.bench.harness import POLICIES, run, run_pair, settle, targets

__all__ = ["POLICIES", "run", "run_pair", "settle", "targets"]
