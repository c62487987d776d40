"""How well the CPU rule's reading tracks each VF's real cost, with the simulator as the truth.

    .venv/bin/python bench/cpu_rule_truth.py mixed-host 5 [DURATION_S]

Runs vftune on one scenario and seed (DURATION_S simulated seconds, default 60: the cold
searches). For every measurement window a search judges, it takes the CPU per bit the tuner
reads (Window.cpu_per_bit: the guest's CPU, which covers all of its VFs, plus the host's cost of
this VF's interrupts) and the same window's truth from the simulator (this VF's own guest and
host CPU over its own bits). Each probe's rise against the first adaptive window of its VF is
then compared with the true rise: the rule keeps or refuses a rate on that sign. Prints the
probes, the median and mean absolute error of the rise, and how many had the wrong sign where
the true rise was beyond 2%. On a guest with one VF the reading is the truth up to the window's
edges; on guests with several, the neighbours' own changes are what is left.
"""

from __future__ import annotations

import bisect
import statistics
import sys
from dataclasses import dataclass, field

import vftune.control.tuner as tuner
import vftune.control.window as window
import vftune.sim.engine as engine
from vftune.bench import harness
from vftune.model import VfSample
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import build

SIGN_FLOOR = 0.02  # a true rise this small is a tie either way


@dataclass
class Truth:
    """Cumulative CPU seconds and bits of one simulated VF, after every simulator step."""

    t: list[float] = field(default_factory=lambda: [0.0])
    cpu: list[float] = field(default_factory=lambda: [0.0])
    bits: list[float] = field(default_factory=lambda: [0.0])

    def per_bit(self, start: float, end: float) -> float | None:
        a, b = bisect.bisect_left(self.t, start - 1e-9), bisect.bisect_left(self.t, end - 1e-9)
        if b >= len(self.t) or b <= a or self.bits[b] <= self.bits[a]:
            return None
        return (self.cpu[b] - self.cpu[a]) / (self.bits[b] - self.bits[a])


@dataclass(frozen=True)
class Reading:
    pci: str
    itr: int
    measured: float
    true: float


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    scenario, seed = argv[0], int(argv[1])
    duration = float(argv[2]) if len(argv) == 3 else 60.0
    spec = build(scenario, seed)
    pcis = [vf_pci(vf.pf, vf.index) for vf in spec.vfs]
    truth = {pci: Truth() for pci in pcis}
    readings: list[Reading] = []
    judged: list[str] = []  # the VF whose tuner is stepping, while it steps

    step = engine.HostSim._step

    def record_step(sim: engine.HostSim, h: float) -> None:
        step(sim, h)
        for pci, vf in zip(pcis, sim.vfs):
            r, tr = vf.last, truth[pci]
            if r is None:
                continue
            tr.t.append(sim.t)
            tr.cpu.append(tr.cpu[-1] + (r.guest_cpu + r.host_cpu) * h)
            tr.bits.append(tr.bits[-1] + (r.rx_Bps + r.tx_Bps) * 8.0 * h)

    cpu_per_bit = window.Window.cpu_per_bit

    def read(w: window.Window, host_irq_cost_s: float = 0.0) -> float | None:
        value = cpu_per_bit(w, host_irq_cost_s)
        if judged and value is not None:
            true = truth[judged[-1]].per_bit(w.start, w.end)
            if true is not None:
                readings.append(Reading(judged[-1], w.itr, value, true))
        return value

    tuner_step = tuner.SearchTuner.step

    def judging(t: tuner.SearchTuner, s: VfSample) -> object:
        judged.append(t.pci)
        try:
            return tuner_step(t, s)
        finally:
            judged.pop()

    engine.HostSim._step = record_step  # type: ignore[method-assign, assignment]
    window.Window.cpu_per_bit = read  # type: ignore[method-assign, assignment]
    tuner.SearchTuner.step = judging  # type: ignore[method-assign, assignment]
    harness.run_pair(scenario, "vftune", seed, duration=duration)

    errors: list[float] = []
    wrong = 0
    for pci in pcis:
        mine = [r for r in readings if r.pci == pci]
        base = next((r for r in mine if r.itr == 0), None)
        if base is None:
            continue
        for r in mine:
            if r.itr == 0:
                continue
            measured, true = r.measured / base.measured - 1.0, r.true / base.true - 1.0
            errors.append(abs(measured - true))
            wrong += abs(true) > SIGN_FLOOR and (measured > 0) != (true > 0)
    if not errors:
        print(f"{scenario} seed {seed}: no probe against an adaptive window in {duration:g} s")
        return 1
    print(f"{scenario} seed {seed}: {len(errors)} probes; |measured - true| CPU-per-bit rise: median "
          f"{statistics.median(errors):.3f}, mean {statistics.fmean(errors):.3f}; wrong sign where the "
          f"true rise is beyond {SIGN_FLOOR:.0%}: {wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
