"""The tuner's mechanisms, each switchable off for the bench: a mechanism stays only if the
bench shows that switching it off costs score or CPU (issue "Tuner v3", rules by ablation).

`vftune bench --ablate NAME` runs `vftune-without:NAME` beside `vftune`: the same tuner with
one mechanism off, through the TunerOptions it already reads (a threshold set where it never
triggers, or the mechanism's own switch). `--ablate list` names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vftune.control.tuner import TunerOptions

ABLATED_TUNER = "vftune-without"
NEVER = 10**9  # a count or ratio no load reaches


@dataclass(frozen=True)
class Mechanism:
    name: str
    what: str  # what switching it off removes
    off: Mapping[str, object]  # TunerOptions fields that switch it off


MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism("host-memory", "a VF's unseen class starts from another VF's setting for it", {"host_memory": False}),
    Mechanism("shared-check", "another VF's setting is measured against the adaptive ITR before it is held",
              {"shared_check": False}),
    Mechanism("span-recall", "a remembered load of another shape is recalled from one counter span, not a window",
              {"span_recall": False}),
    Mechanism("knee-noise", "a rate short of the plateau margin by less than its windows' noise counts as on the plateau",
              {"knee_noise": False}),
    Mechanism("low-edge", "a plateau's walk down starts at the range's lowest rate", {"low_edge": False}),
    Mechanism("guest-share", "on a full guest a window's merit counts its processes' share of the vCPUs",
              {"guest_share": False}),
    Mechanism("port-judge", "windows on a saturated port are judged on the VF's share", {"port_saturation": float(NEVER)}),
    Mechanism("load-change-restart", "a lasting change of rate restarts the search", {"load_change": float(NEVER)}),
    Mechanism("periodic-restart", "the restart every N interrupts or M seconds (the mission's)",
              {"restart_s": float(NEVER), "restart_interrupts": NEVER * NEVER}),
)
BY_NAME = {m.name: m for m in MECHANISMS}


def policy(name: str) -> str:
    """The bench policy that runs vftune with mechanism `name` off; ValueError names a bad one."""
    if name not in BY_NAME:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(BY_NAME)} (--ablate list)")
    return f"{ABLATED_TUNER}:{name}"


def options(policy_name: str) -> TunerOptions | None:
    """The TunerOptions of a `vftune-without:NAME` policy; None for any other policy."""
    head, colon, name = policy_name.partition(":")
    if head != ABLATED_TUNER or not colon:
        return None
    if name not in BY_NAME:
        raise ValueError(f"policy {policy_name!r}: unknown mechanism; known: {', '.join(BY_NAME)}")
    return TunerOptions.from_mapping(dict(BY_NAME[name].off))
