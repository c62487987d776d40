"""--guest-agent auto|on|off: which actuator each VF gets and why (no agent answers here; the
journal across owner changes runs against a real qemu-ga in test_guest_agent_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vftune.hostdriver.linux.guest_agent import Limits, socket_connector
from vftune.hostdriver.linux.guest_wiring import GuestAgentWiring, JournalOfGuests, rx_usecs_for
from vftune.model import Guest, VfInfo
from vftune.store.journal import Journal

STOCK = "enp3s0f1 runs stock ixgbe (no sriov/): the PF cannot push this VF's ITR"
FAST = Limits(call_timeout_s=3.0, job_deadline_s=10.0, guest_min_interval_s=0.0, backoff_initial_s=60.0)


def vf(pci: str, guest: str | None, mac: str | None = "52:54:00:00:00:00", pid: int = 4101,
       driver: str = "vfio-pci") -> VfInfo:
    return VfInfo("enp3s0f1", 0, pci, driver, Guest(guest, f"uuid-{guest}", pid) if guest else None, mac)


PATCHED, HELD, UNHELD, NOMAC = "0000:03:10.0", "0000:03:10.1", "0000:03:10.3", "0000:03:10.5"
VFS = [vf(PATCHED, "vm-a"), vf(HELD, "vm-a"), vf(UNHELD, None, driver="ixgbevf"), vf(NOMAC, "vm-b", mac=None)]


def refusal(info: VfInfo) -> str | None:
    return None if info.pci == PATCHED else STOCK


def wiring(mode: str, sockets: Path) -> GuestAgentWiring:
    return GuestAgentWiring(mode, socket_connector(lambda guest: sockets / f"{guest}.sock"), JournalOfGuests(Journal.memory()),
                            limits=FAST)


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
def test_each_mode_says_per_vf_which_actuator_and_why(tmp_path: Path, mode: str) -> None:
    w = wiring(mode, tmp_path)
    try:
        w.sync(VFS, refusal)
        got = {pci: w.status(pci) for pci in (PATCHED, HELD, UNHELD, NOMAC)}
        assert all(a is not None for a in got.values())
        if mode == "on":
            assert w.handles(PATCHED) and got[PATCHED].actuator == "none"  # until vm-a's agent answers
        else:
            assert got[PATCHED].actuator == "patched" and got[PATCHED].reason == "patched ixgbe: the PF's sriov/0/itr_usecs"
        assert got[UNHELD].actuator == "none" and got[UNHELD].reason == f"{STOCK}; bound to ixgbevf on the host, so " \
                                                                         "there is no guest agent to ask"
        if mode == "off":
            assert not w.handles(HELD) and got[HELD].reason == f"{STOCK}; the guest agent is off (--guest-agent off)"
            assert got[NOMAC].reason == f"{STOCK}; the guest agent is off (--guest-agent off)"
        else:
            assert w.handles(HELD) and got[HELD].actuator == "none"  # vm-a has no agent socket here
            assert "the PF reports no MAC for it yet" in got[NOMAC].reason
    finally:
        w.close()


def test_without_a_transport_every_candidate_is_none_with_the_reason() -> None:
    w = GuestAgentWiring("auto", None, JournalOfGuests(Journal.memory()),
                         unavailable="no libvirt connection (--libvirt-uri none)")
    w.sync(VFS, refusal)
    held = w.status(HELD)
    assert held is not None and held.reason == f"{STOCK}; no guest-agent transport: no libvirt connection " \
                                               "(--libvirt-uri none)"
    assert rx_usecs_for(0) == 1 and rx_usecs_for(20000) == 48


def test_a_bad_mode_is_one_line_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^--guest-agent 'sometimes': choose from auto, on, off$"):
        GuestAgentWiring("sometimes", None, JournalOfGuests(Journal.memory()))
