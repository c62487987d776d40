"""HybridModeController: the per-PF DE/NAPI controller (Salah & Qahtan's hybrid scheme).

Each PfSample's packets go through the shift-smoothed rate estimator, the estimate through the
two-threshold HybridSwitch, and a change of mode becomes a ModeDecision (NAPI with a small
budget, paper: 2). The cliff comes from configuration, from measured costs via cliff_rate, or
later from set_cliff() (a calibration sweep or the cost-model fit). Without a cliff, or when
the PF cannot switch between DE and NAPI, the controller leaves the PF alone and says why in
state(). Pure logic: no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from vftune.control.hybrid import EPSILON, NAPI_BUDGET, HybridSwitch, PacketRateEstimator, cliff_rate
from vftune.control.policy import PfController
from vftune.model import Capabilities, ModeDecision, PfSample


@dataclass(frozen=True)
class ModeOptions:
    cliff_pps: float | None = None  # configured cliff, packets/s
    interrupt_cost_s: float | None = None  # 1/r, with packet_cost_s gives the cliff
    packet_cost_s: float | None = None  # 1/mu
    epsilon: float = EPSILON
    napi_budget: int = NAPI_BUDGET
    estimator_shift: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"mode option {f.name} must be a finite number >= 0, got {value!r}")
        if self.napi_budget < 1:
            raise ValueError(f"mode option napi_budget must be >= 1, got {self.napi_budget!r}")
        if (self.interrupt_cost_s is None) != (self.packet_cost_s is None):
            raise ValueError("mode options interrupt_cost_s and packet_cost_s go together; give both or neither")


class HybridModeController(PfController):
    name = "hybrid"

    def __init__(self, pf: str, caps: Capabilities, options: ModeOptions | None = None) -> None:
        self.pf = pf
        self.caps = caps
        self.options = options or ModeOptions()
        self.estimator: PacketRateEstimator | None = None
        self.switch: HybridSwitch | None = None
        self.cliff_source: str | None = None
        self.last_reason: str | None = None
        self._packets = 0.0
        self.disabled: str | None = None
        # A patched driver runs the switch itself on an 8 ms estimate; the agent then only sets
        # and re-sets the thresholds. Elsewhere the agent switches DE/NAPI on its own estimate.
        self.in_driver = "hybrid" in caps.rx_modes
        self._pushed_cliff: float | None = None
        if not {"de", "napi"} <= set(caps.rx_modes):
            self.disabled = f"PF cannot switch DE/NAPI (modes: {', '.join(caps.rx_modes)})"
        o = self.options
        if o.cliff_pps:
            self.set_cliff(o.cliff_pps, "configured")
        elif o.interrupt_cost_s and o.packet_cost_s:
            self.set_cliff(cliff_rate(1.0 / o.interrupt_cost_s, 1.0 / o.packet_cost_s), "measured costs")

    def set_cliff(self, cliff_pps: float, source: str) -> None:
        """(Re)set the saturation rate; keeps the current mode."""
        mode = self.switch.mode if self.switch else "de"
        self.switch = HybridSwitch(cliff_pps, self.options.epsilon)
        self.switch.mode = mode
        self.cliff_source = source

    def takes_measured_cliff(self) -> bool:
        """A configured (or calibrated) cliff wins over the cost model's estimate."""
        return self.cliff_source in (None, "cost model")

    def step(self, sample: PfSample) -> ModeDecision | None:
        if sample.pf != self.pf:
            raise ValueError(f"sample for PF {sample.pf} given to the controller of {self.pf}")
        if self.estimator is None or abs(self.estimator.window_s - sample.dt) > 1e-9:
            # A fixed window: the estimator is built for the agent's tick and rebuilt if it changes.
            self.estimator = PacketRateEstimator(sample.dt, self.options.estimator_shift)
            self.estimator.update(int(self._packets))
        self._packets += sample.rx_pps * sample.dt
        rate = self.estimator.update(int(self._packets))
        if self.disabled or self.switch is None:
            return None
        if self.in_driver:
            return self._push_thresholds()
        if rate is None:
            return None
        # Someone else may have moved the PF: follow the host.
        if sample.mode == "de":
            self.switch.mode = "de"
        elif sample.mode == "napi":
            self.switch.mode = "napi"
        before = self.switch.mode
        mode = self.switch.update(rate)
        if mode == before and mode == sample.mode:
            return None
        s = self.switch
        if mode == "napi":
            reason = f"napi: {rate:.0f} pps > cliff2 {s.cliff2:.0f} (cliff {s.cliff:.0f}, {self.cliff_source})"
            decision = ModeDecision("napi", self.options.napi_budget, reason)
        else:
            reason = f"de: {rate:.0f} pps < cliff1 {s.cliff1:.0f} (cliff {s.cliff:.0f}, {self.cliff_source})"
            decision = ModeDecision("de", None, reason)
        self.last_reason = reason
        return decision

    def _push_thresholds(self) -> ModeDecision | None:
        """Hand the driver its cliff; again only when the cliff moved by more than 10%."""
        s = self.switch
        assert s is not None
        pushed = self._pushed_cliff
        if pushed is not None and abs(s.cliff - pushed) <= 0.1 * pushed:
            return None
        self._pushed_cliff = s.cliff
        reason = (f"hybrid in the driver: DE below {s.cliff1:.0f}, NAPI above {s.cliff2:.0f} pps "
                  f"(cliff {s.cliff:.0f}, {self.cliff_source})")
        self.last_reason = reason
        return ModeDecision("hybrid", self.options.napi_budget, reason, s.cliff, self.options.epsilon)

    def state(self) -> dict[str, object]:
        s = self.switch
        return {
            "pf": self.pf,
            "mode": s.mode if s else None,
            "rate_pps": self.estimator.rate if self.estimator else None,
            "cliff": s.cliff if s else None,
            "cliff1": s.cliff1 if s else None,
            "cliff2": s.cliff2 if s else None,
            "cliff_source": self.cliff_source,
            "switching": "driver" if self.in_driver else "agent",
            "switches": s.switches if s else 0,
            "napi_budget": self.options.napi_budget,
            "disabled": self.disabled or (None if s else "no cliff configured, measured or calibrated yet"),
            "last_reason": self.last_reason,
        }
