"""The side-by-side benchmark: every simulator scenario with every ITR policy, in simulated time.

harness runs the pairs, groundtruth is the simulator as the bench measures it (and where
guest-run peers live), scores turns runs into figures, targets judges vftune's figures, oracle
is the reference (the best fixed ITR per VF and phase), frontier the cheapest plan that meets the
score targets, registry names every policy, and peers/ holds the policies vftune is measured
against.
"""

from vftune.bench.harness import QUICK_SCENARIOS, default_duration, run, run_pair
from vftune.bench.registry import POLICIES
from vftune.bench.scores import PairResult, aggregate, oracle_warnings, settle
from vftune.bench.targets import Target, conflicts, targets

__all__ = ["POLICIES", "QUICK_SCENARIOS", "PairResult", "Target", "aggregate", "conflicts", "default_duration",
           "oracle_warnings", "run", "run_pair", "settle", "targets"]
