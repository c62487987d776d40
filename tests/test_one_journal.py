"""Both backends keep their originals in the one write journal (store/journal.py): a write is
journaled before it lands, and after a fault (the tick failing until the loop gives up) the stop
puts every original back, newest first, through that journal, which is empty afterwards."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from linux_host import FetchingVfs, ManualClock, host_files, make_host

from vftune.agent.loop import MAX_FAILED_TICKS, Agent, AgentConfig
from vftune.control.policy import FixedItr, PfController
from vftune.hostdriver.base import HostDriver
from vftune.model import ModeDecision, PfSample
from vftune.sim.host import SimHost
from vftune.store.db import Store
from vftune.store.journal import Journal


class DeOnce(PfController):
    name = "test-de-once"

    def __init__(self) -> None:
        self.seen = 0

    def step(self, sample: PfSample) -> ModeDecision | None:
        self.seen += 1
        return ModeDecision("de", 8, "test: first sample") if self.seen == 1 else None


@dataclass
class Backend:
    host: HostDriver
    settings: Callable[[], object]  # every host setting vftune may write, as the host has it now


def _sim(tmp_path: Path, journal: Journal) -> Backend:
    host = SimHost("paper-3vm", seed=0, speed=float("inf"), journal=journal)

    def settings() -> object:
        vfs = {v.pci: host.vf_setting(v.pci) for v in host.inventory().vfs()}
        pfs = {p.name: (host.sim.pfs[i].rx_mode, host.sim.pfs[i].napi_budget)
               for i, p in enumerate(host.inventory().pfs)}
        return vfs, pfs

    return Backend(host, settings)


def _linux(tmp_path: Path, journal: Journal) -> Backend:
    root = tmp_path / "host"
    clock = ManualClock()
    vfs = FetchingVfs(root, clock)
    host, _ = make_host(root, libvirt=False, clock=clock, sleeper=vfs.sleep, journal=journal)

    def settings() -> object:  # what the VFs report they run is theirs, not a setting
        return {p: t for p, t in host_files(root).items() if not p.endswith("/itr_applied_usecs")}

    return Backend(host, settings)


@pytest.fixture(params=[_sim, _linux], ids=["sim", "linux-tree"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, Store, Journal]]:
    store = Store(tmp_path / "vftune.db")  # creates the journal table in the history file
    journal = Journal(tmp_path / "vftune.db")
    b = request.param(tmp_path, journal)
    yield b, store, journal
    b.host.close()
    journal.close()
    store.close()


def test_a_restore_after_a_fault_goes_through_the_one_journal(backend: tuple[Backend, Store, Journal]) -> None:
    b, store, journal = backend
    agent = Agent(b.host, store, lambda pci, caps: FixedItr(20000), lambda pf, caps: DeOnce(),
                  AgentConfig(interval=1.0))
    pristine = b.settings()
    agent.start("one journal")
    for _ in range(3):
        b.host.sleep(agent.config.interval)
        agent.tick()
    assert b.settings() != pristine
    pending = journal.pending()
    assert len(pending) >= 2, "the VFs' rates and the PF's mode were journaled before they were written"
    assert len(pending) == len({(e.target, e.setting) for e in pending}), "one original per setting"

    def broken() -> None:
        raise RuntimeError("counters unreadable (test fault)")

    b.host.snapshot = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        agent.run(threading.Event())  # gives up after MAX_FAILED_TICKS failed ticks in a row
    assert MAX_FAILED_TICKS > 1 and journal.pending() == pending, "a fault forgets nothing"

    restored = agent.shutdown()
    assert all(a.ok for a in restored), [a.error for a in restored if not a.ok]
    assert [a.target for a in restored] == [e.target for e in pending], \
        "every original put back once, newest first, in the journal's order"
    assert b.settings() == pristine
    assert journal.pending() == [] and b.host.restore() == []
