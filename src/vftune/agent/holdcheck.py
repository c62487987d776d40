"""Hold check: whether a searched setting, once held, delivers what its search measured.

A probe is one window. An overloaded receiver can be bistable: a flood of small datagrams into
a guest short of CPU livelocks it in some seconds and not in others at the same rate, so a
probe's window can catch a good second, the rate wins its search, and the hold then delivers
nothing in a third of its seconds. Where the guest reports its socket drops, what reached the
applications is known apart from what the VF received, and what the setting does to it is the
share of the received bits that got through: the offered load moves both, the setting moves
the share. So once per hold, after span_s of held windows with drops known, the hold's share
is compared with the share the search measured at the held rate; one margin below it, the
search's measurement was not what the rate does. Without drops (TCP, or no guest agent) every
received bit counts as delivered and there is nothing to check.

A search after a shortfall measures the same bistable guest and can be as lucky again (latency
objective, dev seed 8 of udp-small: 14 searches in 600 s, none better). So after a shortfall
no hold is checked for quiet_s (the restart clock's period): at most one search more per period
than the restart policy's own. Pure logic.
"""

from __future__ import annotations

from dataclasses import dataclass

from vftune.agent.window import Window


@dataclass(frozen=True)
class Shortfall:
    share: float  # the share of its received bits the hold delivered
    expected: float  # the share the search measured at the held rate
    span_s: float  # the held windows it was measured over


class HoldCheck:
    def __init__(self, span_s: float = 30.0, margin: float = 0.25, quiet_s: float = 600.0) -> None:
        if not span_s > 0:
            raise ValueError(f"span_s must be > 0, got {span_s!r}")
        if not 0 < margin < 1:
            raise ValueError(f"margin must be between 0 and 1, got {margin!r}")
        if not quiet_s >= 0:
            raise ValueError(f"quiet_s must be >= 0, got {quiet_s!r}")
        self.span_s = span_s
        self.margin = margin
        self.quiet_s = quiet_s
        self._short_at: float | None = None  # when the last shortfall was found
        self.start(None)

    def start(self, expected: float | None, t: float = 0.0) -> None:
        """A hold begins at t of a setting its search measured delivering this share of the
        received bits (None: nothing to check, e.g. no drops known or a recalled setting)."""
        quiet = self._short_at is not None and t - self._short_at < self.quiet_s
        self.expected = expected if expected is not None and expected > 0 and not quiet else None
        self._bits = 0.0
        self._delivered = 0.0
        self._seconds = 0.0

    @property
    def armed(self) -> bool:
        return self.expected is not None

    def observe(self, w: Window) -> Shortfall | None:
        """One held window; a Shortfall, once per hold, when the hold delivered well under its
        search's share."""
        if self.expected is None or w.dropped_bits is None or w.bits <= 0:
            return None
        self._bits += w.bits
        self._delivered += w.app_bits
        self._seconds += w.duration
        if self._seconds < self.span_s:
            return None
        expected, share = self.expected, self._delivered / self._bits
        self.expected = None  # once per hold
        if share < expected * (1.0 - self.margin):
            self._short_at = w.end
            return Shortfall(share, expected, self._seconds)
        return None
