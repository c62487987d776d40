"""Why the tuner did something: a cause (enum) with structured fields, rendered to one line.

Decisions and events carry the cause and the numbers behind it; the text an operator reads is
rendered from them, always as "<cause>: <details>", so the stored reason names its cause in its
first word and Cause.of_reason() reads it back (nothing parses the details).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from vftune.itr import itr_label


class Cause(StrEnum):
    START = "start"  # traffic seen on an idle VF: a cold search
    PROBE = "probe"  # the search's next measurement
    REAPPLY = "reapply"  # the host did not apply the probe: asked again
    CONVERGED = "converged"  # a search ended; its result is held
    RESTART_PERIODIC = "restart-periodic"  # N interrupts or M intervals since convergence
    RESTART_LOAD = "restart-load"  # the held load changed (rate for long, or an unseen class)
    RESTART_IN_SEARCH = "restart-in-search"  # the load's class changed under a running search
    RESTART_STARVED = "restart-starved"  # interrupts but no traffic under a set rate: livelock
    RECALL = "recall"  # a known workload class: its remembered setting, within one window
    ABORT = "abort"  # a probe could not be measured: back to the setting in force before
    IDLE = "idle"  # the VF went idle: its setting stays
    PORT = "port"  # a note on how a window on a saturated port was judged
    REFERENCE = "reference"  # the held load's reference was a burst: taken again, no search

    @classmethod
    def of_reason(cls, reason: str) -> Cause | None:
        """The cause a stored reason names in its first word (None for other writers' reasons)."""
        head = reason.split(":", 1)[0].strip()
        try:
            return cls(head)
        except ValueError:
            return None

    @property
    def restart(self) -> bool:
        return self in (Cause.START, Cause.RESTART_PERIODIC, Cause.RESTART_LOAD, Cause.RESTART_IN_SEARCH,
                        Cause.RESTART_STARVED)


def _rate(value: object) -> str:
    return itr_label(int(value)) if isinstance(value, (int, float)) else str(value)


def _pct(value: object) -> str:
    return f"{float(value):+.0%}" if isinstance(value, (int, float)) else str(value)


# One template per cause; fields missing from an event are left out with their clause.
_TEMPLATES: dict[Cause, tuple[str, ...]] = {
    Cause.START: ("traffic seen ({mbps} Mbit/s, {klass})", "; searching {low}..{high}/s", "; {shared}", "; {port}"),
    Cause.PROBE: ("{n} of {of}, {itr}", " ({role})"),
    Cause.REAPPLY: ("VF reports {seen}, asked {itr}",),
    Cause.CONVERGED: ("{outcome} after {probes} probes", "; {port_note}"),
    Cause.RESTART_PERIODIC: ("{count} {unit} since convergence", " of {klass}'s remembered {itr}",
                             "; searching {low}..{high}/s", "; {port}"),
    Cause.RESTART_LOAD: ("{what}", "; searching {low}..{high}/s", "; {shared}", "; {port}"),
    Cause.RESTART_IN_SEARCH: ("{what} during the search", "; searching {low}..{high}/s", "; {port}"),
    Cause.RESTART_STARVED: ("no traffic at {irq_per_s} interrupts/s under {itr}: the guest takes nothing off its"
                            " ring (receive livelock)", "; searching {low}..{high}/s", "; {port}"),
    Cause.RECALL: ("{klass}: remembered {itr} ({source})",),
    Cause.ABORT: ("{why}; back to {itr}",),
    Cause.IDLE: ("load fell to {mbps} Mbit/s", ", holding {itr}"),
    Cause.REFERENCE: ("rate {change} for {lasted_s} s", " outlasted the level before it ({ref_s} s)",
                      " ({mbps} Mbit/s): the reference was a burst, taken again"),
    Cause.PORT: ("saturated ({load} of line rate): judged on the VF's share, {credited_mbps} of {mbps} Mbit/s",),
}
def _share(value: object) -> str:
    return f"{float(value):.0%}" if isinstance(value, (int, float)) else str(value)


_FORMATS: dict[str, Callable[[object], str]] = {"itr": _rate, "seen": _rate, "change": _pct,
                                               "load": _share}


@dataclass(frozen=True)
class TunerEvent:
    """One thing the tuner did or noticed, with the numbers behind it; ``then`` chains the
    events one decision stands for (a restart and its first probe), rendered in order."""

    t: float
    cause: Cause
    fields: Mapping[str, object] = field(default_factory=dict)
    then: tuple[TunerEvent, ...] = ()

    def text(self) -> str:
        values = {k: _FORMATS[k](v) if k in _FORMATS else v for k, v in self.fields.items()}
        parts = []
        for clause in _TEMPLATES[self.cause]:
            try:
                parts.append(clause.format(**values))
            except KeyError:
                continue
        head = f"{self.cause.value}: {''.join(parts)}"
        return "; ".join([head] + [e.text() for e in self.then])
