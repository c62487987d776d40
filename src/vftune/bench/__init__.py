"""The side-by-side benchmark: every simulator scenario with every ITR policy, in simulated time.

harness runs the pairs, scores turns a run into figures, targets judges vftune's figures,
oracle is the reference (the best fixed ITR per phase), registry names every policy, and
peers/ holds the policies vftune is measured against.
"""

from vftune.bench.harness import default_duration, run, run_pair
from vftune.bench.registry import POLICIES
from vftune.bench.scores import PairResult, settle
from vftune.bench.targets import Target, targets

__all__ = ["POLICIES", "PairResult", "Target", "default_duration", "run", "run_pair", "settle", "targets"]
