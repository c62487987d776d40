"""The stock NAPI deferral knob the testbed turns: one setting of three sysfs attributes.

`napi_defer_hard_irqs` (how many empty-handed completions keep the device's interrupt masked),
`gro_flush_timeout` (ns; the hrtimer that polls again while it is masked, and that holds GRO
packets) and `threaded` (NAPI polls in a kernel thread instead of softirq). The same knobs the
agent writes on a PF without the patched driver.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Knob:
    defer: int = 0  # napi_defer_hard_irqs
    gro_ns: int = 0  # gro_flush_timeout, ns
    threaded: bool = False

    def __post_init__(self) -> None:
        if self.defer < 0 or self.gro_ns < 0:
            raise ValueError(f"knob values must be >= 0, got defer={self.defer} gro_flush_timeout={self.gro_ns}")

    @property
    def no_deferral(self) -> bool:
        """Whether NAPI completes at once (the stock default): a timeout of 0 disables deferral
        and GRO holding whatever napi_defer_hard_irqs says."""
        return self.gro_ns == 0

    @property
    def label(self) -> str:
        base = "no deferral" if self.no_deferral else f"defer {self.defer} gro {self.gro_ns / 1000:g}us"
        return base + (" threaded" if self.threaded else "")

    def sysfs(self) -> dict[str, str]:
        """Attribute name -> value to write under /sys/class/net/<dev>/."""
        return {
            "napi_defer_hard_irqs": str(self.defer),
            "gro_flush_timeout": str(self.gro_ns),
            "threaded": "1" if self.threaded else "0",
        }

    def as_dict(self) -> dict[str, object]:
        return {"napi_defer_hard_irqs": self.defer, "gro_flush_timeout_ns": self.gro_ns,
                "threaded": self.threaded, "label": self.label}


NO_DEFERRAL = Knob()

# gro_flush_timeout values of the sweep, us: 1-2-5 steps across the range where the timer sits
# between the veth's per-packet cost (a few us) and the open-loop inter-arrival time.
GRO_GRID_US = (10, 20, 50, 100, 200, 500)


def sweep_grid(gro_us: tuple[int, ...] = GRO_GRID_US) -> list[Knob]:
    """Every setting the sweep measures: no deferral, and each timeout with defer 0 (GRO holding
    only) and defer 1 (interrupt deferral), each with threaded NAPI off and on."""
    grid: list[Knob] = []
    for threaded in (False, True):
        grid.append(Knob(0, 0, threaded))
        for defer in (0, 1):
            grid.extend(Knob(defer, us * 1000, threaded) for us in gro_us)
    return grid
