"""SimHost: the simulated KVM host behind the HostDriver interface.

The simulated clock starts at 0 and moves only in sleep(); snapshots are stamped with it.
`speed` is simulated seconds per wall second: sleep(s) also waits s/speed of wall time, and
speed=float("inf") never waits (benchmarks). A sleep ends early when stop() is called or the
`stop_event` given at construction is set; the clock then stands where the model got to.

Actuators answer with Applied read back from the model: for an ITR, `old` is the previous
setting (0 = the guest's adaptive ITR) and `applied` the rate the NIC delivers for the request
(whole interval steps, 2.048 us on the 82599). A request the host cannot take (an unknown VF or
PF, an ITR outside the NIC profile's range (sim/nic.py; 956..488281 on the 82599), an unknown rx
mode) does not raise: it returns Applied(ok=False, error=<one line naming the value>) and changes
nothing, so the agent can record the failed decision. The
simulated driver pair is the patched one: per-VF ITR, DE/NAPI/hybrid and NAPI budget on the PF.
The PF's own rx-usecs stays at ixgbe's adaptive default: vftune never writes it.
"""

from __future__ import annotations

import math
import threading
import time

from vftune.control.hybrid import NAPI_BUDGET
from vftune.hostdriver.base import HostDriver, drops_scope
from vftune.itr import MAX_VFS_PER_PF, PF_DEVICE_ID_SFP
from vftune.model import (
    GUEST_CLOCK_TICK_S,
    RX_MODES,
    Applied,
    Capabilities,
    Guest,
    GuestCpuTimes,
    Inventory,
    PfCounters,
    PfInfo,
    Snapshot,
    VfActuator,
    VfCounters,
    VfDrops,
    VfInfo,
)
from vftune.sim.engine import COUNTER_REFRESH_S, GSTATS_MIN_INTERVAL_S, HostSim, SimVf
from vftune.sim.layout import PF_DRIVER, pf_name, pf_pci, vf_pci
from vftune.sim.nic import nic_profile
from vftune.sim.scenarios import build
from vftune.sim.workload import Poll
from vftune.store.journal import Journal, JournalEntry, TargetGone

MAX_NAPI_BUDGET = 1024
DEFAULT_STEP_S = 0.5


# Write-journal entry kinds (store/journal.py), the same journal the Linux backend writes: what
# restore() needs to put one simulated setting back, as first written.
KIND_SIM_ITR = "sim_itr"  # payload: itr_request (0 = the guest's adaptive ITR)
KIND_SIM_ITR_BOUNDS = "sim_itr_bounds"  # payload: bounds [min, max] interrupts/s (0 = open)
KIND_SIM_RX_MODE = "sim_rx_mode"  # payload: rx_mode, napi_budget, cliff_pps (null: the driver's)


class SimHost(HostDriver):
    name = "sim"

    def __init__(self, scenario: str, seed: int = 0, speed: float = 1.0, step: float = DEFAULT_STEP_S,
                 patched_counters: bool | None = None, stop_event: threading.Event | None = None,
                 ethtool_refresh: bool = True, journal: Journal | None = None) -> None:
        """ethtool_refresh: every snapshot first reads the stock PFs' ethtool statistics, as the
        Linux backend does (fresh VF counters each tick, rate-limited, at a CPU cost).
        journal: where originals wait until restore(); None keeps them in this process (the
        simulated host itself lives no longer than the process)."""
        if not speed > 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.scenario, self.seed, self.speed = scenario, seed, speed
        self.spec = build(scenario, seed)  # ValueError naming valid scenarios when unknown
        self.sim = HostSim(self.spec, seed, step=step, patched_counters=patched_counters)
        self.nic = nic_profile(self.spec.nic)
        self.ethtool_refresh = ethtool_refresh
        self._stop = stop_event if stop_event is not None else threading.Event()
        self._lock = threading.RLock()
        self._journal = journal if journal is not None else Journal.memory()
        self._journal.register(KIND_SIM_ITR, self._restore_itr)
        self._journal.register(KIND_SIM_ITR_BOUNDS, self._restore_bounds)
        self._journal.register(KIND_SIM_RX_MODE, self._restore_rx_mode)
        self._pf_names = [pf_name(p) for p in range(self.spec.num_pfs)]
        self._vf_by_pci = {vf_pci(vf.pf, vf.index): i for i, vf in enumerate(self.spec.vfs)}
        self._previous: dict[str, tuple[int, int, int, int]] = {}
        self._confirm: dict[str, int] = {}  # VF -> the request it has not yet reported running
        self._inventory = self._build_inventory()

    # -- what the host has --------------------------------------------------------------
    def _build_inventory(self) -> Inventory:
        guests = {vm.name: Guest(vm.name, vm.uuid) for vm in self.spec.vms}
        pfs = []
        for p in range(self.spec.num_pfs):
            vfs = tuple(
                VfInfo(pf=pf_name(p), index=vf.index, pci=vf_pci(p, vf.index),
                       driver="vfio-pci" if vf.guest else None,
                       guest=guests[vf.guest] if vf.guest else None)
                for vf in self.spec.vfs if vf.pf == p
            )
            pfs.append(PfInfo(pf_name(p), pf_pci(p), PF_DEVICE_ID_SFP, PF_DRIVER, len(vfs), MAX_VFS_PER_PF, vfs))
        return Inventory(tuple(pfs))

    def inventory(self) -> Inventory:
        return self._inventory

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend="sim", itr_min=self.nic.itr_min, itr_max=self.nic.itr_max, itr_unit_us=self.nic.step_us,
            vf_itr=True, vf_itr_bounds=True,
            rx_modes=RX_MODES,
            napi_budget=True,
            counter_refresh_s=0.0 if self.sim.patched_counters else (
                GSTATS_MIN_INTERVAL_S if self.ethtool_refresh else COUNTER_REFRESH_S),
            missing=self._missing(),
        )

    def _missing(self) -> tuple[str, ...]:
        missing = []
        if self.spec.posted_interrupts:
            missing.append("per-VF interrupt counts: posted interrupts bypass the host (vfio-msix counts frozen)")
        if not self.spec.irq_time_accounting:
            missing.append("host hardirq time: kernel built without CONFIG_IRQ_TIME_ACCOUNTING (irq time reads ~0)")
        return tuple(missing)

    # -- clock --------------------------------------------------------------------------
    def now(self) -> float:
        with self._lock:
            return self.sim.t

    def stop(self) -> None:
        """Wake any sleep() now; later sleeps return at once."""
        self._stop.set()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._stop.is_set():
            return
        if self.speed == float("inf"):
            with self._lock:
                self.sim.advance(seconds)
            return
        start_wall, start_sim = time.monotonic(), self.now()
        end_sim = start_sim + seconds
        while not self._stop.is_set():
            with self._lock:
                chunk = min(self.sim.step, end_sim - self.sim.t)
                if chunk <= 1e-9:
                    return
                self.sim.advance(chunk)
                due = start_wall + (self.sim.t - start_sim) / self.speed
            delay = due - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return

    # -- reading --------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self._lock:
            if self.ethtool_refresh:
                self.sim.read_ethtool_stats()
            now = self.sim.t
            vfs: dict[str, VfCounters] = {}
            for pci, i in self._vf_by_pci.items():
                state = self.sim.vfs[i]
                seen = state.published
                rx_p, rx_b, tx_p, tx_b = int(seen.rx_packets), int(seen.rx_bytes), int(seen.tx_packets), int(seen.tx_bytes)
                counters = (rx_p, rx_b, tx_p, tx_b)
                previous = self._previous.get(pci)
                refresh_due = now - state.published_time > COUNTER_REFRESH_S + 1e-6
                stale = previous == counters and refresh_due and not self.sim.patched_counters
                self._previous[pci] = counters
                # With posted interrupts the host's vfio-msix counts never move; the Linux
                # backend's counter health check flags that, the simulated host says so at once.
                # So it does for a poll-mode driver in the guest, whose vector never fires. (A
                # NAPI guest saturated by its load takes ~0 interrupts in the fluid model, but a
                # real one still completes a poll now and then: its count moves.)
                posted = self.spec.posted_interrupts
                polling = isinstance(self.spec.workload(self.spec.vfs[i], self.spec.phase_index(now)), Poll)
                frozen = posted or (polling and counters != (0, 0, 0, 0))
                vfs[pci] = VfCounters(rx_p, rx_b, tx_p, tx_b, interrupts=0 if posted else int(state.live.interrupts),
                                      counters_time=state.published_time, stale=stale, interrupts_frozen=frozen)
            pfs = {
                name: PfCounters(int(pf.rx_packets), int(pf.rx_bytes), current_mode=pf.mode_in_force,
                                 rate_pps=int(pf.rate_pps), switches=pf.hybrid.switches)
                for name, pf in zip(self._pf_names, self.sim.pfs)
            }
            # Guests with an agent report their sockets' receive drops (the Linux backend reads
            # them through the QEMU guest agent); without one they are unknown.
            drops = {name: int(n) for name, n in self.sim.guest_rx_drops.items() if self.spec.guest_has_agent(name)}
            # So do they their own CPU accounting (guest-get-cpustats), whole milliseconds as qemu-ga's.
            times = {name: GuestCpuTimes(user=_ticks(user), system=0.0, interrupts=_ticks(irq),
                                         idle=_ticks(idle), steal=_ticks(steal))
                     for name, (user, irq, idle, steal) in self.sim.guest_cpu_times.items() if name in drops}
            return Snapshot(time=now, vfs=vfs, pfs=pfs, guest_cpu=dict(self.sim.guest_cpu),
                            host_irq_cpu=self.sim.host_irq_cpu_visible, host_cpus=self.spec.host_cpus,
                            guest_rx_drops=drops, guest_cpu_times=times)

    def vf_itr(self, vf_pci_address: str) -> int:
        """The interrupt rate the VF runs at now (its adaptive ITR's when untuned)."""
        with self._lock:
            return self.sim.vfs[self._vf_by_pci[vf_pci_address]].itr

    def vf_setting(self, vf_pci_address: str) -> tuple[int, tuple[int, int]]:
        """The host's setting the VF runs under, as last fetched: its ITR request (0 = its own
        adaptive ITR) and the bounds on that adaptive ITR. It moves only when the host writes."""
        with self._lock:
            vf = self.sim.vfs[self._vf_by_pci[vf_pci_address]]
            return vf.itr_request, vf.itr_bounds

    # -- actuators ----------------------------------------------------------------------
    def set_vf_itr(self, vf_pci: str, itr: int) -> Applied:
        """Store the host's request in the PF; the VF takes it at its next fetch (vf_itr_fetch_s),
        so the write is pending until then and collect_applied() confirms it, as on Linux."""
        with self._lock:
            index = self._vf_by_pci.get(vf_pci)
            if index is None:
                return Applied(vf_pci, "itr", itr, None, None, ok=False, error=f"unknown VF {vf_pci}")
            state = self.sim.vfs[index]
            old = state.host_request
            low, high = self.nic.itr_min, self.nic.itr_max
            if itr != 0 and not low <= itr <= high:
                return Applied(vf_pci, "itr", itr, old, old, ok=False,
                               error=f"{vf_pci}: ITR {itr} outside {low}..{high} interrupts/s (0 = adaptive)")
            self._journal.remember(KIND_SIM_ITR, vf_pci, "itr", {"itr_request": old})
            state.host_request = self.nic.quantize(itr) if itr else 0
            state.host_written = self.sim.t
            if self.sim.fetch_s <= 0:
                state.fetch()
            if state.itr_request == state.host_request:
                self._confirm.pop(vf_pci, None)
                return Applied(vf_pci, "itr", itr, old, state.host_request)
            self._confirm[vf_pci] = state.host_request
            return Applied(vf_pci, "itr", itr, old, state.host_request, pending=True)

    def collect_applied(self) -> list[Applied]:
        """Requests the VFs took since the last call, as the Linux backend reports them: once the
        VF reports running it (its itr_applied_usecs; 1 for the adaptive ITR)."""
        out = []
        with self._lock:
            for pci, want in list(self._confirm.items()):
                if self.sim.vfs[self._vf_by_pci[pci]].itr_request != want:
                    continue
                out.append(Applied(pci, "itr_confirmed", want, None, want))
                del self._confirm[pci]
        return out

    def set_vf_itr_bounds(self, vf_pci: str, min_itr: int, max_itr: int) -> Applied:
        requested = f"{min_itr}..{max_itr}"
        with self._lock:
            index = self._vf_by_pci.get(vf_pci)
            if index is None:
                return Applied(vf_pci, "itr_bounds", requested, None, None, ok=False, error=f"unknown VF {vf_pci}")
            state = self.sim.vfs[index]
            old = "{}..{}".format(*state.host_bounds)
            low, high = self.nic.itr_min, self.nic.itr_max
            bad = [r for r in (min_itr, max_itr) if r != 0 and not low <= r <= high]
            if bad or (min_itr and max_itr and min_itr > max_itr):
                return Applied(vf_pci, "itr_bounds", requested, old, old, ok=False,
                               error=f"{vf_pci}: ITR bounds {requested} not within {low}..{high} "
                               "interrupts/s with min <= max (0 = open)")
            self._journal.remember(KIND_SIM_ITR_BOUNDS, vf_pci, "itr_bounds", {"bounds": list(state.host_bounds)})
            quantize = self.nic.quantize
            state.host_bounds = (quantize(min_itr) if min_itr else 0, quantize(max_itr) if max_itr else 0)
            state.host_written = self.sim.t
            if self.sim.fetch_s <= 0:
                state.fetch()
            return Applied(vf_pci, "itr_bounds", requested, old, "{}..{}".format(*state.host_bounds))

    def vf_actuator(self, vf_pci: str) -> VfActuator | None:
        if vf_pci not in self._vf_by_pci:
            return None
        counters = "fresh counters" if self.sim.patched_counters else "stock counters (2 s refresh)"
        return VfActuator("patched", f"simulated patched ixgbe, {counters}")

    def vf_drops(self, vf_pci: str) -> VfDrops | None:
        vfs = self._inventory.vfs()
        vf = next((v for v in vfs if v.pci == vf_pci), None)
        if vf is None:
            return None
        scope = drops_scope(vf, vfs)
        if scope is not None or vf.guest is None:
            return scope
        if not self.spec.guest_has_agent(vf.guest.name):  # what the Linux backend reports without an agent
            where = "[host] guest_agent" if self.spec.guest_agent is False else "[[vf]] guest_agent"
            return VfDrops("unavailable", f"guest {vf.guest.name}: no guest agent answers (the scenario's "
                           f"{where} = false)")
        return VfDrops("guest-agent", f"guest {vf.guest.name}: simulated UDP socket drops through its guest agent")

    def _pf_index(self, pf: str) -> int | None:
        return self._pf_names.index(pf) if pf in self._pf_names else None

    def set_pf_rx_mode(self, pf: str, mode: str, napi_budget: int | None = None,
                       cliff_pps: float | None = None, epsilon: float | None = None) -> Applied:
        with self._lock:
            p = self._pf_index(pf)
            if p is None:
                return Applied(pf, "rx_mode", mode, None, None, ok=False, error=f"unknown PF {pf}")
            state = self.sim.pfs[p]
            old = state.rx_mode
            if mode not in RX_MODES:
                return Applied(pf, "rx_mode", mode, old, old, ok=False,
                               error=f"{pf}: rx mode {mode!r} is not one of {', '.join(RX_MODES)}")
            if napi_budget is not None and not 1 <= napi_budget <= MAX_NAPI_BUDGET:
                return Applied(pf, "rx_mode", mode, old, old, ok=False,
                               error=f"{pf}: NAPI budget {napi_budget} outside 1..{MAX_NAPI_BUDGET}")
            if cliff_pps is not None and not 1 <= cliff_pps <= 1e8:
                return Applied(pf, "rx_mode", mode, old, old, ok=False,
                               error=f"{pf}: cliff {cliff_pps} packets/s outside 1..100000000")
            self._journal.remember(KIND_SIM_RX_MODE, pf, "rx_mode",
                                   {"rx_mode": old, "napi_budget": state.napi_budget, "cliff_pps": state.cliff_pps})
            if cliff_pps is not None:
                state.cliff_pps = float(cliff_pps)  # the simulated driver keeps its epsilon (0.15)
            if napi_budget is None and mode == "hybrid" and old != "hybrid":
                napi_budget = NAPI_BUDGET  # the paper's budget, the patched driver's default
            state.rx_mode = mode
            if napi_budget is not None:
                state.napi_budget = napi_budget
            if mode != "hybrid":
                state.mode_in_force = mode
            return Applied(pf, "rx_mode", mode, old, state.rx_mode)

    def restore(self) -> list[Applied]:
        """Every journaled original back, newest first, in force at once (a restore does not wait
        for the VF's next fetch); the journal forgets what was put back."""
        with self._lock:
            return self._journal.restore()

    @property
    def journal(self) -> Journal:
        return self._journal

    def _vf_state_of(self, entry: JournalEntry) -> SimVf:
        index = self._vf_by_pci.get(entry.target)
        if index is None:
            raise TargetGone(f"{entry.target}: no such VF on this simulated host")
        return self.sim.vfs[index]

    def _restore_itr(self, entry: JournalEntry) -> Applied:
        vf = self._vf_state_of(entry)
        want = int(entry.payload.get("itr_request", 0))
        was = vf.host_request
        vf.host_request = want
        vf.fetch()
        self._confirm.pop(entry.target, None)
        return Applied(entry.target, "itr", want, was, vf.host_request)

    def _restore_bounds(self, entry: JournalEntry) -> Applied:
        vf = self._vf_state_of(entry)
        low, high = (int(b) for b in entry.payload.get("bounds", (0, 0)))
        was = "{}..{}".format(*vf.host_bounds)
        vf.host_bounds = (low, high)
        vf.fetch()
        return Applied(entry.target, "itr_bounds", f"{low}..{high}", was, "{}..{}".format(*vf.host_bounds))

    def _restore_rx_mode(self, entry: JournalEntry) -> Applied:
        p = self._pf_index(entry.target)
        if p is None:
            raise TargetGone(f"{entry.target}: no such PF on this simulated host")
        pf = self.sim.pfs[p]
        mode, cliff = str(entry.payload.get("rx_mode")), entry.payload.get("cliff_pps")
        was = pf.rx_mode
        pf.rx_mode, pf.napi_budget = mode, int(entry.payload.get("napi_budget", pf.napi_budget))
        pf.cliff_pps = float(cliff) if cliff is not None else None
        if mode != "hybrid":
            pf.mode_in_force = mode
        return Applied(entry.target, "rx_mode", mode, was, pf.rx_mode)

    def close(self) -> None:
        self.stop()


def _ticks(seconds: float) -> float:
    """Seconds as qemu-ga reports them: whole clock ticks of the guest's kernel."""
    return math.floor(seconds / GUEST_CLOCK_TICK_S) * GUEST_CLOCK_TICK_S
