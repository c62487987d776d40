"""How close the agent's fitted interrupt cost is to the simulator's, per scenario.

    .venv/bin/python bench/cost_fit_truth.py [--seed N] [--duration S] SCENARIO...

Runs the agent (vftune's search, stock PFs) on each scenario for DURATION simulated seconds
(default 300) and prints the interrupt cost it fitted (what `vftune status` and
`GET /v1/host` report, costmodel.fit with one per-packet cost per load) beside the simulator's
own cost of one interrupt to a guest (handler and VM exits), and beside the fit the same rows
give when they are pooled as one machine's, as Geist et al. fitted theirs. The guests' CPU is
what both fits see; the host's forwarding of each interrupt is not in it. The marginal cost of
a bulk guest's interrupt is not exactly the handler's in the simulator either: fewer
interrupts let GRO merge more packets per poll.
"""

from __future__ import annotations

import argparse
import math

from vftune.agent import costmodel
from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.sim.host import SimHost
from vftune.sim.model import platform_for
from vftune.sim.scenarios import build


def fitted(scenario: str, seed: int, duration: float) -> tuple[Agent, float]:
    host = SimHost(scenario, seed=seed, speed=math.inf)
    agent = Agent(host, None, vf_policy("search"), pf_controller("stock"), AgentConfig())
    agent.start("cost-fit-truth")
    for _ in range(int(round(duration / agent.config.interval))):
        host.sleep(agent.config.interval)
        agent.tick()
    agent.costs.refit()
    return agent, platform_for(build(scenario, seed)).per_interrupt_s


def _us(fit: costmodel.CostFit | None) -> str:
    return "-" if fit is None else f"{fit.gamma * 1e3:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--duration", type=float, default=300.0)
    args = parser.parse_args()
    print("| scenario | interrupt, simulator us | fitted, one cost per load (the agent), us "
          "| pooled as one machine, us | rows | note |")
    print("|---|---|---|---|---|---|")
    for name in args.scenarios:
        agent, truth_s = fitted(name, args.seed, args.duration)
        rows = [r for _, r in agent.costs.rows]
        try:
            pooled: costmodel.CostFit | None = costmodel.fit(rows)
        except ValueError:
            pooled = None
        note = agent.costs.last_error or ""
        print(f"| {name} | {truth_s * 1e6:.2f} | {_us(agent.costs.fit)} | {_us(pooled)} | {len(rows)} | {note} |")


if __name__ == "__main__":
    main()
