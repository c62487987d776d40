"""The simulated host's state over time: settings, counters, and the fluid model stepped forward.

HostSim holds everything that changes (ITR settings, ixgbevf adaptive state, PF modes, cumulative
counters) and advances it in steps of at most `step` seconds; within a step rates are constant,
so counters at any instant inside it (the refresh points) are exact linear interpolations.
`steady_state` evaluates the same model without noise for the sweep and the oracle.

What a real host shows, by host profile (HostSpec):
- Stock counters: ixgbe's service task copies the VF counters about every 2 s
  (ixgbe_service_task -> ixgbe_update_stats), sometimes late; reading the PF's ethtool
  statistics (ethtool -S, node_exporter's ethtool collector) refreshes them at once
  (ixgbe_get_ethtool_stats calls ixgbe_update_stats), modelled as reads at random times
  (ETHTOOL_READS_PER_S). Patched counters are fresh at every read.
- CPU contention: the guests' busy vCPUs and the host's irq work share `host_cpus` cores; when
  they are oversubscribed every vCPU gets its share, with per-second capacity jitter (noise.py).
- irq_time_accounting False (Debian 6.1's config has no CONFIG_IRQ_TIME_ACCOUNTING): hardirq
  time is sampled on the tick and reads ~0, so the VFs' forwarding cost vanishes from the
  host's irq/softirq time (`host_irq_cpu_visible`); softirq time for PF traffic stays.
- posted_interrupts: the host's vfio-msix counts stay frozen (host.py reports them so).
- vf_itr_fetch_s: the patched ixgbevf takes the host's ITR request (and bounds) from its
  watchdog, every vf_itr_fetch_s at its own phase, never when the host writes it (the PF never
  writes the mailbox for it): a write is in force 0..vf_itr_fetch_s later, at the step nearest
  the VF's fetch. While the host wrote within vf_itr_busy_s before a fetch, the PF's reply says
  so and the VF fetches again after vf_itr_fetch_busy_s (vfdriver-patches 14/15): the first write
  after a quiet spell waits for the slow fetch, the next ones of a search land within the fast
  period, and after the busy window the VF's service timer takes over again (2-4 s later).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vftune.control.hybrid import EPSILON, HybridSwitch
from vftune.itr import ITR_MAX_RATE, frame_bytes, wire_bytes
from vftune.sim.adaptive import AdaptiveItr
from vftune.sim.model import VfInput, VfRates, platform_for, share_port
from vftune.sim.noise import INCAST_STREAM, NoiseStream, NoNoise
from vftune.sim.pfmode import STOCK_BUDGET, HostRx, cliff_pps, host_rx, pf_itr_cap
from vftune.sim.workload import HostSpec, Idle, Poll, RequestResponse, Stream, Transmit, Workload

COUNTER_REFRESH_S = 2.0  # ixgbe's service task copies VF counters this often
MISSED_REFRESH_P = 0.02  # the service task is sometimes held off (resets, busy workqueue)
REFRESH_JITTER_S = 0.05  # the service timer's slack (round_jiffies_relative)
ETHTOOL_READS_PER_S = 1.0 / 30.0  # something reads ethtool -S on the PF now and then
# The agent's own ETHTOOL_GSTATS read of a stock PF (hostdriver/linux/ethtool_stats.py), rate-
# limited like the Linux backend's. Its cost is an estimate, not a measurement of an 82599:
# ixgbe_update_stats reads ~150 port registers and ~10 per VF over PCIe (~0.5-1 us each).
GSTATS_MIN_INTERVAL_S = 0.25
GSTATS_BASE_S = 100e-6
GSTATS_PER_VF_S = 10e-6
PF_NOISE_STREAM = 10_000  # noise stream ids for PF host traffic start here


# CFS (Linux 6.1, kernel/sched/fair.c): a waking task preempts the running one only when it is
# behind by more than sysctl_sched_wakeup_granularity, 1 ms scaled by 1 + ilog2(min(CPUs, 8)).
SCHED_WAKEUP_GRANULARITY_S = 4e-3


def run_queue_wait_s(oversubscription: float) -> float:
    """Mean wait of a woken vCPU for a core when busy vCPUs exceed the cores `oversubscription`
    times over: it finds its core busy with another vCPU with probability 1 - 1/x, and then
    waits half a wakeup granularity on average."""
    if oversubscription <= 1.0:
        return 0.0
    return (1.0 - 1.0 / oversubscription) * SCHED_WAKEUP_GRANULARITY_S / 2.0


def _ramp_factor(w: Workload, t_in_cycle: float) -> float:
    if not isinstance(w, Stream | Transmit | Poll) or w.ramp is None or not w.offered_bps:
        return 1.0
    return w.ramp.factor(w.offered_bps, t_in_cycle)


@dataclass(frozen=True, slots=True)
class VfTotals:
    """A VF's cumulative counters (fractional: the model is a fluid)."""

    rx_packets: float = 0.0
    rx_bytes: float = 0.0
    tx_packets: float = 0.0
    tx_bytes: float = 0.0
    interrupts: float = 0.0

    @property
    def bits(self) -> float:
        """Bits the VF's byte counters count, both directions."""
        return (self.rx_bytes + self.tx_bytes) * 8.0

    def after(self, r: VfRates, h: float) -> VfTotals:
        """These totals after `h` seconds at rates `r`."""
        return VfTotals(self.rx_packets + r.rx_pps * h, self.rx_bytes + r.rx_Bps * h,
                        self.tx_packets + r.tx_pps * h, self.tx_bytes + r.tx_Bps * h,
                        self.interrupts + r.interrupts_per_s * h)

    def toward(self, end: VfTotals, frac: float) -> VfTotals:
        """The totals `frac` of the way from these to `end` (rates are constant inside a step)."""
        return VfTotals(self.rx_packets + (end.rx_packets - self.rx_packets) * frac,
                        self.rx_bytes + (end.rx_bytes - self.rx_bytes) * frac,
                        self.tx_packets + (end.tx_packets - self.tx_packets) * frac,
                        self.tx_bytes + (end.tx_bytes - self.tx_bytes) * frac,
                        self.interrupts + (end.interrupts - self.interrupts) * frac)


@dataclass
class SimVf:
    itr_request: int = 0  # what the VF runs with: the host's request as last fetched; 0 = adaptive
    adaptive: AdaptiveItr = field(default_factory=AdaptiveItr)
    live: VfTotals = VfTotals()  # what the hardware has counted
    published: VfTotals = VfTotals()  # what the PF last copied out (ixgbe's service task)
    published_time: float = 0.0
    prev_live: VfTotals = VfTotals()  # at the start of the last step
    last: VfRates | None = None

    itr_bounds: tuple[int, int] = (0, 0)  # host-set (min, max) interrupts/s for adaptive; 0 = open
    # What the host wrote in the PF, which the VF fetches at next_fetch.
    host_request: int = 0
    host_bounds: tuple[int, int] = (0, 0)
    next_fetch: float = 0.0
    watchdog_phase: float = 0.0  # the VF's 2-s service timer ticks at this phase
    host_written: float = -float("inf")  # when the host last wrote the request or bounds

    def fetch(self) -> None:
        """The VF takes the host's values."""
        self.itr_request, self.itr_bounds = self.host_request, self.host_bounds

    @property
    def itr(self) -> int:
        if self.itr_request > 0:
            return self.itr_request
        low, high = self.itr_bounds  # the patched ixgbevf clamps what its adaptive ITR picks
        return min(high or ITR_MAX_RATE, max(low, self.adaptive.itr))


@dataclass
class SimPf:
    rx_mode: str = "napi"  # the setting: napi, de or hybrid
    napi_budget: int = STOCK_BUDGET
    rx_usecs: int = 1  # the PF's own coalescing: ixgbe's adaptive default (vftune never sets it)
    # The patched driver's switch: the agent's, its cliff re-set every step (1.0 until then).
    hybrid: HybridSwitch = field(default_factory=lambda: HybridSwitch(1.0, EPSILON))
    cliff_pps: float | None = None  # configured through rxmode/cliff_pps; None: the driver default
    mode_in_force: str = "napi"
    rate_pps: float = 0.0
    rx_packets: float = 0.0
    rx_bytes: float = 0.0
    last: HostRx = field(default_factory=lambda: HostRx(0.0, 0.0, 0.0, 0.0))


@dataclass(frozen=True)
class HostRates:
    vfs: list[VfRates]
    pfs: list[HostRx]
    guest_cpu: dict[str, float]  # seconds/second including background
    host_kernel_cpu: float  # irq + softirq seconds/second
    host_kernel_cpu_visible: float = 0.0  # what the host's accounting shows of it
    # Each guest's own accounting of its vCPUs' seconds/second (GuestCpuTimes' user, interrupts,
    # idle, steal): its network work is interrupt time, its background and application user time.
    guest_split: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)


class HostSim:
    def __init__(self, spec: HostSpec, seed: int = 0, step: float = 0.5, noise: bool = True,
                 patched_counters: bool | None = None) -> None:
        if step <= 0:
            raise ValueError(f"step must be positive, got {step}")
        self.spec, self.seed, self.step = spec, seed, step
        self.patched_counters = spec.patched_counters if patched_counters is None else patched_counters
        self.t = 0.0
        self.vfs = [SimVf() for _ in spec.vfs]
        self.pfs = [SimPf() for _ in range(spec.num_pfs)]
        self.vf_noise: list[NoiseStream] | list[NoNoise]
        self.pf_noise: list[NoiseStream] | list[NoNoise]
        if noise:
            self.vf_noise = [NoiseStream(seed, i, spec.noise_sigma, spec.burst_gain,
                                         None if vf.incast_group is None else INCAST_STREAM + vf.incast_group)
                             for i, vf in enumerate(spec.vfs)]
            self.pf_noise = [NoiseStream(seed, PF_NOISE_STREAM + p, spec.noise_sigma, spec.burst_gain)
                             for p in range(spec.num_pfs)]
        else:
            self.vf_noise = [NoNoise() for _ in spec.vfs]
            self.pf_noise = [NoNoise() for _ in range(spec.num_pfs)]
        self.platform = platform_for(spec)
        self.guest_cpu = {vm.name: 0.0 for vm in spec.vms}
        self.guest_cpu_times = {vm.name: [0.0, 0.0, 0.0, 0.0] for vm in spec.vms}  # HostRates.guest_split, summed
        self.guest_rx_drops = {vm.name: 0.0 for vm in spec.vms}  # datagrams dropped at guests' sockets
        self.host_irq_cpu = 0.0
        self.host_irq_cpu_visible = 0.0  # what /proc/stat's irq + softirq columns show
        self._host_kernel_prev = 0.0
        self._rng = np.random.default_rng([seed, 99_999])
        # Each VF's watchdog runs at its own phase (its own stream: the others' draws stay as they were).
        self.fetch_s = spec.vf_itr_fetch_s
        self.fetch_busy_s = spec.vf_itr_fetch_busy_s
        self.busy_s = spec.vf_itr_busy_s
        fetch_rng = np.random.default_rng([seed, 77_777])
        for vf in self.vfs:
            vf.next_fetch = vf.watchdog_phase = float(fetch_rng.random()) * self.fetch_s
        # ixgbe's service timer runs at its own phase relative to our clock.
        self._refresh_phase = float(self._rng.random()) * COUNTER_REFRESH_S
        self._next_refresh = self._refresh_phase
        self._next_ethtool = float(self._rng.exponential(1.0 / ETHTOOL_READS_PER_S))
        self._last_gstats = -float("inf")
        self._cliffs: dict[tuple[int, int, int], float] = {}
        self._port_vfs = [[i for i, vf in enumerate(spec.vfs) if vf.pf == p] for p in range(spec.num_pfs)]
        self._incast = [[spec.vfs[i].incast_group for i in idx] if any(spec.vfs[i].incast_group is not None for i in idx)
                        else None for idx in self._port_vfs]
        self._last_key: tuple[object, ...] | None = None
        self._last_rates: HostRates | None = None
        self._vf_memo: dict[VfInput, VfRates] = {}
        self._memo_second = -1

    # -- one evaluation of the model -------------------------------------------------------
    def rates(self, t: float, itrs: list[int], host_kernel_prev: float) -> HostRates:
        """Rates of every VF and PF at time t with these delivered ITRs."""
        spec = self.spec
        phase = spec.phase_index(t)
        workloads = [spec.workload(vf, phase) for vf in spec.vfs]
        active: dict[str, int] = {}  # busy receive queues per guest, one vCPU each
        for vf, w in zip(spec.vfs, workloads):
            if vf.guest is not None and not isinstance(w, Idle):
                active[vf.guest] = active.get(vf.guest, 0) + vf.queues
        busy = sum(min(vm.vcpus, vm.background_cpu + vm.app_cpu + active.get(vm.name, 0)) for vm in spec.vms)
        cores_left = max(0.05, spec.host_cpus - host_kernel_prev)
        share = min(1.0, cores_left / busy) if busy > 0 else 1.0
        runq = run_queue_wait_s(busy / cores_left) if spec.overcommit else 0.0
        within = float(int(t % spec.cycle_s if spec.cycle_s else t))  # ramps move once a second, as noise does
        inputs: list[VfInput] = []
        for i, (vf, w) in enumerate(zip(spec.vfs, workloads)):
            cap_noise, load_noise = self.vf_noise[i].at(t)
            if vf.guest is None:
                vcpu = 1.0  # an unassigned VF's traffic would be handled on the host
            else:
                vm = spec.vm_by_name[vf.guest]
                vcpu = min(1.0, (vm.vcpus - vm.background_cpu) / max(1, active.get(vm.name, 0)))
            offered = load_noise * _ramp_factor(w, within)
            if isinstance(w, Stream) and spec.microburst_s > 0.0:
                inputs.append(VfInput(w, itrs[i], share * vcpu * cap_noise, offered, vf.queues,
                                      spec.microburst_gain, spec.microburst_s))
            else:
                inputs.append(VfInput(w, itrs[i], share * vcpu * cap_noise, offered, vf.queues,
                                      runq_s=runq if isinstance(w, RequestResponse) else 0.0))
        pf_inputs = []
        for p in range(spec.num_pfs):
            pf = self.pfs[p]
            lam = spec.host_load(p, phase).pps * self.pf_noise[p].at(t)[1]
            # Hybrid's sub-mode moves once per step in _step(), not per evaluation.
            mode = pf.hybrid.mode if pf.rx_mode == "hybrid" else pf.rx_mode
            pf_inputs.append((lam, mode, pf.napi_budget, pf.rx_usecs))
        # Noise changes once a simulated second: the half-steps of a second with unchanged
        # settings see the same inputs, and get the same rates without evaluating them again.
        key = (phase, tuple(inputs), tuple(pf_inputs))
        if key == self._last_key and self._last_rates is not None:
            return self._last_rates
        second = int(t)
        if second != self._memo_second or len(self._vf_memo) > 64 * len(inputs):
            self._vf_memo.clear()  # VFs whose inputs did not change within the second reuse their rates
            self._memo_second = second
        by_index: dict[int, VfRates] = {}
        pf_rates: list[HostRx] = []
        for p in range(spec.num_pfs):
            idx = self._port_vfs[p]
            load = spec.host_load(p, phase)
            lam, mode, budget, rx_usecs = pf_inputs[p]
            port_rates, host_wire = share_port([inputs[i] for i in idx], lam * wire_bytes(load.packet_bytes) * 8.0,
                                               self.platform, self._vf_memo, self._incast[p])
            by_index.update(zip(idx, port_rates))
            lam = host_wire / (wire_bytes(load.packet_bytes) * 8.0)
            pf_rates.append(host_rx(load, lam, mode, budget, pf_itr_cap(rx_usecs, lam), self.platform.stack))
        vf_rates = [by_index[i] for i in range(len(inputs))]
        guest_cpu = {vm.name: vm.background_cpu for vm in spec.vms}
        for vf, r in zip(spec.vfs, vf_rates):
            if vf.guest is not None:
                guest_cpu[vf.guest] += r.guest_cpu
        # The guests' own applications get what their network work and background leave of
        # their vCPUs (interrupts and softirqs run first), and their VFs carry that share.
        progress: dict[str, float] = {}
        split: dict[str, tuple[float, float, float, float]] = {}
        for vm in spec.vms:
            network = guest_cpu[vm.name] - vm.background_cpu
            if vm.app_cpu > 0.0:
                got = min(vm.app_cpu, max(0.0, share * vm.vcpus - guest_cpu[vm.name]))
                guest_cpu[vm.name] += got
                progress[vm.name] = got / vm.app_cpu
            # The rest of its vCPUs' time: runnable but not run (the host's cores were short) is
            # steal, the remainder idle.
            wanted = min(vm.vcpus, vm.background_cpu + vm.app_cpu + active.get(vm.name, 0))
            left = max(0.0, vm.vcpus - guest_cpu[vm.name])
            steal = min(left, max(0.0, wanted - guest_cpu[vm.name]) if share < 1.0 else 0.0)
            split[vm.name] = (guest_cpu[vm.name] - network, network, left - steal, steal)
        if progress:
            vf_rates = [r._replace(app_progress=progress[vf.guest]) if vf.guest in progress else r
                        for vf, r in zip(spec.vfs, vf_rates)]
        forwarding = sum(r.host_cpu for r in vf_rates)
        kernel = forwarding + sum(r.kernel_cpu for r in pf_rates)
        visible = kernel if spec.irq_time_accounting else kernel - forwarding
        self._last_key, self._last_rates = key, HostRates(vf_rates, pf_rates, guest_cpu, kernel, visible, split)
        return self._last_rates

    def _cliff(self, pf: int, phase: int) -> float:
        rx_usecs = self.pfs[pf].rx_usecs
        key = (pf, phase, rx_usecs)
        if key not in self._cliffs:
            self._cliffs[key] = cliff_pps(self.spec.host_load(pf, phase), rx_usecs, self.platform.stack)
        return self._cliffs[key]

    # -- time ------------------------------------------------------------------------------
    def delivered_itrs(self) -> list[int]:
        return [vf.itr for vf in self.vfs]

    def advance(self, seconds: float) -> None:
        end = self.t + seconds
        while self.t < end - 1e-9:
            self._step(min(self.step, end - self.t))

    def _fetch(self, t0: float, h: float) -> None:
        """VFs whose watchdog fetch falls nearest this step's start take the host's values now."""
        for vf in self.vfs:
            if self.fetch_s <= 0:
                vf.fetch()
                continue
            while vf.next_fetch <= t0 + h / 2:
                vf.fetch()
                vf.next_fetch = self._after_fetch(vf, vf.next_fetch)

    def _after_fetch(self, vf: SimVf, fetched: float) -> float:
        """When the VF fetches next: after the fast period while the host was busy with it, else at
        the first tick of its 2-s service timer at least a period after this fetch."""
        if self.fetch_busy_s > 0 and fetched - vf.host_written < self.busy_s:
            return fetched + self.fetch_busy_s
        ticks = math.ceil((fetched + self.fetch_s - vf.watchdog_phase) / self.fetch_s - 1e-9)
        return vf.watchdog_phase + ticks * self.fetch_s

    def apply_requests_now(self) -> None:
        """Every VF takes the host's values at once: the bench's fixed rates and oracle are references."""
        for vf in self.vfs:
            vf.fetch()

    def _step(self, h: float) -> None:
        t0 = self.t
        self._fetch(t0, h)
        phase = self.spec.phase_index(t0)
        for p, pf in enumerate(self.pfs):
            if pf.rx_mode == "hybrid":
                pf.hybrid.set_cliff(pf.cliff_pps or self._cliff(p, phase))
                pf.hybrid.update(pf.rate_pps)
        r = self.rates(t0, self.delivered_itrs(), self._host_kernel_prev)
        self._host_kernel_prev = r.host_kernel_cpu
        for vf, vr in zip(self.vfs, r.vfs):
            vf.prev_live = vf.live
            vf.live = vf.live.after(vr, h)
            vf.last = vr
            if vf.itr_request == 0:
                vf.adaptive.update(vr.rx_Bps * h, vr.tx_Bps * h, vr.interrupts_per_s * h)
        for p, (pf, pr) in enumerate(zip(self.pfs, r.pfs)):
            load = self.spec.host_load(p, phase)
            pf.rx_packets += pr.delivered_pps * h
            pf.rx_bytes += pr.delivered_pps * h * frame_bytes(load.packet_bytes)
            # The patched driver's estimator: shift-friendly smoothing over 8 ms windows settles
            # well inside one step, so it reads the arrival rate of the step.
            lam = load.pps * self.pf_noise[p].at(t0)[1]
            pf.rate_pps = lam
            pf.mode_in_force = pf.hybrid.mode if pf.rx_mode == "hybrid" else pf.rx_mode
            pf.last = pr
        for name, cpu in r.guest_cpu.items():
            self.guest_cpu[name] += cpu * h
        for name, parts in r.guest_split.items():
            summed = self.guest_cpu_times[name]
            for i, part in enumerate(parts):
                summed[i] += part * h
        for slot, vr in zip(self.spec.vfs, r.vfs):
            if slot.guest is not None and vr.socket_drop_pps:
                self.guest_rx_drops[slot.guest] += vr.socket_drop_pps * h
        self.host_irq_cpu += r.host_kernel_cpu * h
        self.host_irq_cpu_visible += r.host_kernel_cpu_visible * h
        self.t = t0 + h
        self._refresh_counters(t0, h)

    def _refresh_counters(self, t0: float, h: float) -> None:
        if self.patched_counters:
            for vf in self.vfs:
                vf.published = vf.live
                vf.published_time = self.t
            return
        while min(self._next_refresh, self._next_ethtool) <= self.t + 1e-9:
            if self._next_ethtool < self._next_refresh:  # ethtool -S on the PF: every VF's counters now
                at = self._next_ethtool
                self._next_ethtool += float(self._rng.exponential(1.0 / ETHTOOL_READS_PER_S))
            else:
                at = self._next_refresh
                self._next_refresh += COUNTER_REFRESH_S
                if self._rng.random() < MISSED_REFRESH_P:
                    continue
                at = min(self.t, at + float(self._rng.uniform(0.0, REFRESH_JITTER_S)))
            frac = min(1.0, max(0.0, (at - t0) / h if h > 0 else 1.0))
            for vf in self.vfs:
                vf.published = vf.prev_live.toward(vf.live, frac)
                vf.published_time = at

    def read_ethtool_stats(self) -> bool:
        """The agent reads every stock PF's ethtool statistics now (ETHTOOL_GSTATS): ixgbe copies
        every VF's counters (ixgbe_get_ethtool_stats -> ixgbe_update_stats), at the cost of the
        register reads in host kernel time. At most every GSTATS_MIN_INTERVAL_S; False when the
        counters are patched (always fresh) or the last read is more recent than that."""
        if self.patched_counters or self.t - self._last_gstats < GSTATS_MIN_INTERVAL_S - 1e-9:
            return False
        self._last_gstats = self.t
        for p in range(len(self.pfs)):
            vfs = self._port_vfs[p]
            cost = GSTATS_BASE_S + GSTATS_PER_VF_S * len(vfs)
            # The agent's own system time (process context, the ioctl): network CPU, but not in
            # the host's irq/softirq columns.
            self.host_irq_cpu += cost
            for i in vfs:
                self.vfs[i].published = self.vfs[i].live
                self.vfs[i].published_time = self.t
        return True

    # -- steady state ----------------------------------------------------------------------
    def steady_state(self, t: float, itrs: list[int], iterations: int = 4) -> HostRates:
        """Rates once the host has settled at these ITRs (the share of host cores converged)."""
        kernel = 0.0
        r = self.rates(t, itrs, kernel)
        for _ in range(iterations - 1):
            r = self.rates(t, itrs, r.host_kernel_cpu)
        return r
