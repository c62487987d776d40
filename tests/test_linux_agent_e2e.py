"""The agent on the Linux backend end to end: fixture host tree, wire-exact netlink replies,
libvirt's test driver; several ticks recorded, and on stop every written value put back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import FetchingVfs, ManualClock, host_files, make_host

from vftune.agent.loop import Agent, AgentConfig
from vftune.control.policy import FixedItr, PfController
from vftune.model import (
    Capabilities,
    ModeDecision,
    PfSample,
)
from vftune.store.db import Store

pytest.importorskip("libvirt")
TICKS = 5


def vf_settings(files: dict[str, str]) -> dict[str, str]:
    return {path: text for path, text in files.items() if not path.endswith("/itr_applied_usecs")}


class DeOnceThenHybrid(PfController):
    """PF controller for the test: DE with poll limit 8 on the first sample, hybrid on the third."""

    name = "test-de-hybrid"

    def __init__(self) -> None:
        self.seen = 0

    def step(self, sample: PfSample) -> ModeDecision | None:
        self.seen += 1
        if self.seen == 1:
            return ModeDecision("de", 8, "test: first sample")
        if self.seen == 3:
            return ModeDecision("hybrid", 2, "test: third sample")
        return None


def test_agent_ticks_records_and_restores_on_the_linux_backend(tmp_path: Path) -> None:
    root = tmp_path / "host"
    clock = ManualClock()
    vfs = FetchingVfs(root, clock)  # the VFs take the host's requests at their fetch and report them
    host, replies = make_host(root, clock=clock, sleeper=vfs.sleep)
    store = Store(tmp_path / "vftune.db")
    try:
        pristine = None
        agent = Agent(host, store, lambda pci, caps: FixedItr(20000),
                      lambda pf, caps: DeOnceThenHybrid(), AgentConfig(interval=1.0))
        pristine = host_files(root)
        agent.start("e2e")
        for _ in range(TICKS):
            host.sleep(agent.config.interval)
            agent.tick()
        assert agent.ticks == TICKS + 1  # start() primes with one tick

        # Samples: every VF of both PFs, with guest CPU for guest-held VFs.
        web0_vf = hosttree.vf_bdf(hosttree.PF0[0], 0)
        rows = store.samples(web0_vf, 0, float("inf"), 100)
        assert len(rows) == TICKS
        assert store.count("samples") == TICKS * 126
        assert agent.vfs[web0_vf].sample is not None
        assert agent.vfs[web0_vf].sample.rx_pps == pytest.approx(replies.rate("enp3s0f0", 0))

        # Writes landed where the host allows them and were refused, with the reason, where not.
        pf0_dev = root / "sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0"
        assert (pf0_dev / "sriov/0/itr_usecs").read_text() == "48\n"
        assert (pf0_dev / "rxmode/mode").read_text() == "hybrid\n"
        assert (pf0_dev / "rxmode/poll_limit").read_text() == "2\n"
        assert (root / "sys/class/net/enp3s0f1/napi_defer_hard_irqs").read_text() == "0\n"
        assert (root / "proc/sys/net/core/netdev_budget").read_text() == "8\n"
        # The capabilities say a stock PF's VFs take no ITR: not attempted, so no decision rows.
        stock_vf = hosttree.vf_bdf(hosttree.PF1[0], 0)
        assert store.decisions(stock_vf, 0, float("inf"), 10) == []
        # A patched PF's VF whose driver never negotiated per-VF ITR: refused once, then backing off.
        unready = hosttree.vf_bdf(hosttree.PF0[0], 40)
        refused = store.decisions(unready, 0, float("inf"), 10)
        assert len(refused) == 1 and not refused[0]["ok"] and "itr_capable is 0" in refused[0]["error"]
        assert agent.vfs[web0_vf].itr == 20345  # 24 EITR steps, what the 82599 delivers
        rows = store.decisions(web0_vf, 0, float("inf"), 100)
        written = [d for d in rows if d["ok"] and d["setting"] == "itr"]
        assert len(written) == 1, "a fixed ITR is written once, not every tick"
        assert [d["applied"] for d in rows if d["setting"] == "itr_confirmed"] == ["20345"]  # the VF's report

        restored = agent.shutdown()
        assert restored and all(a.ok for a in restored)
        # Every host setting is back; what the VFs report of what they run is theirs.
        assert vf_settings(host_files(root)) == vf_settings(pristine)
        restore_rows = [d for d in store.decisions(None, 0, float("inf"), 1000) if d["reason"] == "restore on stop"]
        assert len(restore_rows) == len(restored)
    finally:
        host.close()
        store.close()


def test_agent_sees_capabilities_of_a_mixed_host(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path)
    try:
        seen: list[Capabilities] = []
        Agent(host, None, lambda pci, caps: seen.append(caps) or FixedItr(20000),
              lambda pf, caps: DeOnceThenHybrid()).refresh_inventory()
        assert seen and seen[0].vf_itr and seen[0].rx_modes == ("napi", "de")
    finally:
        host.close()
