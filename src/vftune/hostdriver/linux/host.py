"""LinuxHost: the HostDriver for a real KVM host (sysfs, procfs, netlink, ethtool, libvirt).

Roots are configurable as node_exporter's --path.sysfs / --path.procfs are, so the same code
runs on a fixture tree. Every write is read back and its old value journaled; restore()
puts everything back. Expected failures come back as Applied(ok=False) plus a log line.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vftune.config import GUEST_RX_DROPS_MODES, GUEST_SOURCES
from vftune.hostdriver.base import HostDriver, HostError, drops_scope
from vftune.hostdriver.linux import patched_attrs as pa
from vftune.hostdriver.linux.counter_health import CounterHealth
from vftune.hostdriver.linux.cpu import ProcessCpu, parse_proc_stat
from vftune.hostdriver.linux.ethtool_stats import EthtoolStatsRefresher
from vftune.hostdriver.linux.guest_agent import (
    AgentChannel,
    AgentError,
    Limits,
    UnixSocketChannel,
    libvirt_connector,
)
from vftune.hostdriver.linux.guest_agent.socket_drops import DEFAULT_DROPS_LIMITS, DropsLimits, GuestDropsReader
from vftune.hostdriver.linux.guest_wiring import (
    DEFAULT_LIMITS,
    KIND_GUEST_AGENT,
    GuestAgentWiring,
    GuestOriginal,
    JournalOfGuests,
    guest_original,
)
from vftune.hostdriver.linux.libvirt_guests import GuestDirectory, GuestView, import_libvirt
from vftune.hostdriver.linux.netlink_vfstats import LinkMemo, LinkStats, as_source, parse_link
from vftune.hostdriver.linux.proc_interrupts import InterruptCounts, InterruptsMemo, parse_interrupts
from vftune.hostdriver.linux.qemu_guests import GUEST_AGENT_PORT, QemuScan, scan_processes
from vftune.hostdriver.linux.sysfs_inventory import PfDevice, SysfsScan, scan
from vftune.hostdriver.linux.sysfs_io import as_count, read_optional, read_source, read_text, write_text
from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, itr_bounds_to_usecs, itr_to_usecs, usecs_bounds_to_itr, usecs_to_itr
from vftune.model import (
    RX_MODES,
    Applied,
    Capabilities,
    Inventory,
    PfCounters,
    SettingValue,
    Snapshot,
    VfActuator,
    VfCounters,
    VfDrops,
    VfInfo,
    make_vf_counters,
)
from vftune.store.journal import Journal, JournalEntry, JournalError, TargetAbsent, TargetGone

PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
log = logging.getLogger("vftune.linux")

# Stock-kernel stand-in for "stay in polling" (Salim's parked state): defer hard IRQs for two
# empty polls, re-arm after 200 us. The stock default (0, 0) re-enables the interrupt after
# every poll, which at low load is one interrupt per packet: "de".
STOCK_NAPI_DEFER = 2
STOCK_NAPI_GRO_FLUSH_NS = 200_000
PATCHED_REFRESH_S = 0.01  # patched PF: one hardware read per VF per 10 ms
STOCK_REFRESH_S = 2.0  # stock ixgbe service task
# The VF fetches the host's request at least every 2 s and reports what it applied: two periods.
CONFIRM_DEADLINE_S = 2 * pa.VF_CONFIRM_S


# Journal entry kinds (store/journal.py): what restore() needs to put one write back
# (guest_wiring.KIND_GUEST_AGENT for the guest agent's).
KIND_SYSFS = "sysfs"  # payload: root ("sysfs"/"procfs"/""), path under it, old text
KIND_VF_ITR = "vf_itr"  # payload: root, path of the patched PF's per-VF itr_usecs, old_request, ran_usecs
KIND_VF_ITR_BOUNDS = "vf_itr_bounds"  # payload: root, path of itr_min_usecs (max beside it), old_min, old_max
class LinuxHost(HostDriver):
    name = "linux"

    def __init__(
        self,
        sysfs_root: str | os.PathLike[str] = "/sys",
        procfs_root: str | os.PathLike[str] = "/proc",
        libvirt_uri: str | None = "qemu:///system",
        netlink: Any = None,
        *,
        run_root: str | os.PathLike[str] = "/run",
        guest_agent: str = "off",
        guest_agent_sockets: str | os.PathLike[str] | None = None,
        guest_agent_limits: Limits = DEFAULT_LIMITS,
        guest_rx_drops: str = "off",
        guest_rx_drops_limits: DropsLimits = DEFAULT_DROPS_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        sleeper: Callable[[float], None] = time.sleep,
        libvirt_wait_s: float = 5.0,
        journal: Journal | None = None,
        counter_refresh: EthtoolStatsRefresher | None = None,
        guest_source: str = "libvirt",
    ) -> None:
        """netlink: None opens a NETLINK_ROUTE socket (netlink_vfstats.RawLinkSource); an IPRoute
        (e.g. in a netns) or any object with link_reply(ifname) -> wire bytes is used instead.
        guest_agent: "auto", "on" or "off" (guest_wiring.py): when a VF's ITR is set inside its
        guest with the guest's ethtool through the QEMU guest agent. guest_agent_sockets: a
        directory of agent sockets named <guest>.sock, used instead of libvirt's
        qemuAgentCommand (hosts without libvirt, tests).
        guest_rx_drops: "auto" reads each VF-owning guest's socket receive drops (its
        /proc/net/snmp{,6} RcvbufErrors) through the same transport, off the tick
        (guest_agent/socket_drops.py), into Snapshot.guest_rx_drops; "off" never.
        journal: where originals are kept until restored; None keeps them in this process only.
        counter_refresh: reads stock PFs' ethtool statistics so VF counters are fresh each
        snapshot (ethtool_stats.py); None opens one in this network namespace.
        guest_source: "libvirt", "qemu" (the QEMU processes' command lines, qemu_guests.py) or
        "auto" (libvirt where it answers, else the processes); `vftune run` defaults to auto."""
        self.sysfs_root = Path(sysfs_root)
        self.procfs_root = Path(procfs_root)
        self.libvirt_uri = libvirt_uri
        self._source = as_source(netlink)
        self._clock = clock
        self._sleeper = sleeper
        self._libvirt_wait_s = libvirt_wait_s
        self._journal = journal if journal is not None else Journal.memory()
        self._journal.register(KIND_SYSFS, self._restore_sysfs_entry)
        self._journal.register(KIND_VF_ITR, self._restore_vf_itr_entry)
        self._journal.register(KIND_GUEST_AGENT, self._restore_guest_agent_entry)
        self._journal.register(KIND_VF_ITR_BOUNDS, self._restore_bounds_entry)
        self._stopping = False  # set by stop(): no write after the final restore has begun
        self._macs: dict[str, str] = {}  # VF PCI -> IFLA_VF_MAC, from the latest snapshot
        self._confirm: dict[str, tuple[Path, int, float]] = {}  # VF -> (itr_applied_usecs, usecs, deadline)
        self._asked_back: dict[str, str] = {}  # itr_usecs path -> its text before restore asked the VF back
        self._gstats = counter_refresh if counter_refresh is not None else EthtoolStatsRefresher()
        self._cpu = ProcessCpu(self.procfs_root)
        self._scan: SysfsScan | None = None
        self._health: CounterHealth | None = None
        self._inventory_lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        if guest_source not in GUEST_SOURCES:
            raise ValueError(f"--guest-source {guest_source!r}: choose from {', '.join(GUEST_SOURCES)}")
        # Where guests come from: libvirt, the QEMU processes' command lines, or (auto) libvirt
        # where it answers, else the processes.
        self.guest_source = guest_source
        self._qemu = QemuScan(())
        self._guests: GuestDirectory | None = None
        if libvirt_uri and guest_source != "qemu":
            self._guests = GuestDirectory(
                libvirt_uri, self.procfs_root, Path(run_root), on_change=self._on_guests_changed
            )
        connect, unavailable = self._agent_transport(guest_agent_sockets)
        self._drops_unavailable: str | None = None
        self._guest_agent = GuestAgentWiring(guest_agent, connect, JournalOfGuests(self._journal),
                                             unavailable=unavailable, limits=guest_agent_limits, clock=self._clock)
        self._drops = self._drops_reader(guest_rx_drops, connect, unavailable, guest_rx_drops_limits)
        self._journal.register(KIND_GUEST_AGENT, self._restore_guest_agent_entry)
        self._vf_infos: tuple[VfInfo, ...] = ()
        self._vf_index_of: tuple[tuple[VfInfo, ...], dict[str, VfInfo], dict[str, int]] | None = None
        # Per PF: its last reply's IFLA_VF_INFO payloads, parsed, and its shape (netlink_vfstats.LinkMemo).
        self._vfinfo_memo: dict[str, LinkMemo] = {}
        self._irq_memo = InterruptsMemo()  # /proc/interrupts rows as the last read parsed them
        self._proc_paths = (self.procfs_root / "interrupts", self.procfs_root / "stat")  # read every tick
        self._pf_files: dict[str, tuple[PfDevice, tuple[Path, ...]]] = {}  # _pf_paths

    def _agent_transport(self, sockets: str | os.PathLike[str] | None
                         ) -> tuple[Callable[[str], AgentChannel] | None, str]:
        """(connect, why there is none): agent sockets where given, else libvirt's qemuAgentCommand."""
        connect: Callable[[str], AgentChannel] | None = None
        unavailable = ""
        if sockets is not None:
            where = Path(sockets)
            shared: dict[str, UnixSocketChannel] = {}
            lock = threading.Lock()

            def connect(guest: str) -> AgentChannel:
                # One channel per guest for the actuator and the drops reader: an agent's socket
                # serves one client at a time. A closed UnixSocketChannel reconnects on its next call.
                with lock:
                    if guest not in shared:
                        shared[guest] = UnixSocketChannel(where / f"{guest}.sock", guest)
                    return shared[guest]
        elif self._guests is not None and self.guest_source == "libvirt":
            guests = self._guests

            def connect(guest: str) -> AgentChannel:  # on the guest's worker: a missing libvirt is its error
                import_libvirt()
                return libvirt_connector(guests.connection)(guest)
        elif self.guest_source != "libvirt":
            # From the QEMU process' -chardev socket wired to org.qemu.guest_agent.0 (qemu), or
            # libvirt's agent call where libvirt answers (auto).
            channels: dict[str, UnixSocketChannel] = {}
            channel_lock = threading.Lock()
            directory = self._guests

            def connect(guest: str) -> AgentChannel:
                if directory is not None and self.guest_source_in_use == "libvirt":
                    import_libvirt()
                    return libvirt_connector(directory.connection)(guest)
                path = self._qemu.agent_socket(guest)
                if path is None:
                    raise AgentError("absent", f"guest {guest}: its QEMU command line wires no guest agent "
                                     f"socket ({GUEST_AGENT_PORT})")
                with channel_lock:
                    held = channels.get(guest)
                    if held is None or str(held.path) != str(self._rooted_socket(path)):
                        held = channels[guest] = UnixSocketChannel(self._rooted_socket(path), guest)
                    return held
        else:
            unavailable = "no libvirt connection (--libvirt-uri none) and no --guest-agent-sockets"
        return connect, unavailable

    def _drops_reader(self, mode: str, connect: Callable[[str], AgentChannel] | None, unavailable: str,
                      limits: DropsLimits) -> GuestDropsReader | None:
        if mode not in GUEST_RX_DROPS_MODES:
            raise ValueError(f"--guest-rx-drops {mode!r}: choose from {', '.join(GUEST_RX_DROPS_MODES)}")
        if mode == "off":
            return None
        if connect is None:
            self._drops_unavailable = f"guests' socket receive drops are not read (--guest-rx-drops auto): {unavailable}"
            log.info("%s", self._drops_unavailable)
            return None
        return GuestDropsReader(connect, limits=limits, clock=self._clock)

    # -- inventory ----------------------------------------------------------------

    def _on_guests_changed(self, view: GuestView) -> None:
        for listener in list(self._listeners):
            listener()

    def add_inventory_listener(self, listener: Callable[[], None]) -> None:
        """Called (on libvirt's worker thread) when guests start or stop: time to call inventory()."""
        self._listeners.append(listener)

    def _rooted_socket(self, path: str) -> Path:
        """A socket path from a command line, under the procfs root's host (a fixture tree: its
        parent) when the agent reads another root than /proc."""
        if self.procfs_root == Path("/proc"):
            return Path(path)
        return self.procfs_root.parent / path.lstrip("/")

    @property
    def guest_source_in_use(self) -> str:
        """"libvirt" or "qemu": where the last inventory's guests came from."""
        if self.guest_source == "auto":
            return "libvirt" if self._guests is not None and self._guests.view().connected else "qemu"
        return self.guest_source

    def _guest_view(self) -> GuestView:
        view = GuestView() if self._guests is None else self._guests.start(self._libvirt_wait_s)
        if self.guest_source == "libvirt" or (self.guest_source == "auto" and view.connected):
            return view
        self._qemu = scan_processes(self.procfs_root)
        return GuestView(by_pci=self._qemu.by_pci, errors=self._qemu.errors, connected=True)

    def qemu_guests_changed(self) -> bool:
        """Whether a QEMU process the last inventory found has exited (its VFs go back)."""
        return self.guest_source_in_use == "qemu" and any(
            not (self.procfs_root / str(pid)).exists() for pid in self._qemu.pids)

    @property
    def inventory_errors(self) -> tuple[str, ...]:
        """Why guests may be missing from the inventory (libvirt down, unreadable domain XML)."""
        libvirt = self._guests.view().errors if self._guests is not None else ()
        if self.guest_source_in_use == "qemu":  # with auto: why libvirt was not used, then the processes'
            return libvirt + self._qemu.errors
        return libvirt

    def inventory(self) -> Inventory:
        sysfs = scan(self.sysfs_root)
        guests = self._guest_view().by_pci
        macs = dict(self._macs)  # IFLA_VF_MAC as the last snapshot read it (netlink is read once a tick)
        pfs = tuple(
            dataclasses.replace(pf, vfs=tuple(dataclasses.replace(vf, guest=guests.get(vf.pci), mac=macs.get(vf.pci))
                                              for vf in pf.vfs))
            for pf in sysfs.pfs
        )
        self._gstats.forget()
        with self._inventory_lock:
            self._scan = sysfs
            if self._health is None:
                self._health = CounterHealth(self._refresh_s(sysfs))
            self._health.refresh_s = self._refresh_s(sysfs)
            self._health.forget(set(sysfs.vf_devices))
        self._vf_infos = tuple(vf for pf in pfs for vf in pf.vfs)
        self._guest_agent.sync(self._vf_infos, self._patched_refusal)  # after _scan: it reads the PFs
        if self._drops is not None:  # only guests that hold a VF: their drops are what tuning moves
            self._drops.track({vf.guest.name for vf in self._vf_infos if vf.guest is not None})
        return Inventory(pfs=pfs, ignored=sysfs.ignored)

    def _patched_refusal(self, vf: VfInfo) -> str | None:
        """None when the patched PF can push this VF's ITR now; else why not, in one line."""
        dev = self._scan.pf_devices.get(vf.pf) if self._scan is not None else None
        if dev is None or not dev.patched_itr:
            return f"{vf.pf} runs stock ixgbe (no {pa.SRIOV_DIR}/): the PF cannot push this VF's ITR"
        capable = pa.vf_itr_capable(dev.device_dir, vf.index)
        if read_optional(capable) != "1":
            return f"{capable} is not 1: the VF's driver has not fetched the host's ITR (stock ixgbevf?)"
        return None

    def vf_actuator(self, vf_pci: str) -> VfActuator | None:
        return self._guest_agent.status(vf_pci)

    def _vf_index(self) -> tuple[dict[str, VfInfo], dict[str, int]]:
        """The VFs by PCI address and how many each guest holds, worked out once per inventory:
        a view asks for every VF's drops, and a scan of all VFs for each was O(n^2) a view."""
        infos = self._vf_infos
        if self._vf_index_of is None or self._vf_index_of[0] is not infos:
            held: dict[str, int] = {}
            for v in infos:
                if v.guest is not None:
                    held[v.guest.name] = held.get(v.guest.name, 0) + 1
            by_pci: dict[str, VfInfo] = {}
            for v in infos:
                by_pci.setdefault(v.pci, v)  # the first, as a scan finds it
            self._vf_index_of = (infos, by_pci, held)
        return self._vf_index_of[1], self._vf_index_of[2]

    def vf_drops(self, vf_pci: str) -> VfDrops | None:
        by_pci, held = self._vf_index()
        vf = by_pci.get(vf_pci)
        if vf is None:
            return None
        if self._drops is None:
            if self._drops_unavailable is not None:
                return VfDrops("unavailable", self._drops_unavailable)
            return VfDrops("off", "guests' socket receive drops are not read (--guest-rx-drops off)")
        scope = drops_scope(vf, self._vf_infos, held.get(vf.guest.name, 0) if vf.guest is not None else None)
        if scope is not None or vf.guest is None:
            return scope
        return self._drops.source(vf.guest.name)

    def collect_applied(self) -> list[Applied]:
        return self._guest_agent.collect() + self._confirmations()

    def _confirmations(self) -> list[Applied]:
        """The patched VF's own report (itr_applied_usecs) of the interval vftune asked for (1 for
        its adaptive ITR): "itr_confirmed" once it matches, a failure if it does not within
        CONFIRM_DEADLINE_S."""
        out = []
        now = self._clock()
        for pci, (path, usecs, deadline) in list(self._confirm.items()):
            reported = read_optional(path)
            if reported == str(usecs):
                out.append(Applied(pci, "itr_confirmed", usecs_to_itr(usecs), None, usecs_to_itr(usecs)))
            elif now >= deadline:
                out.append(self._failed(pci, "itr_confirmed", usecs_to_itr(usecs), (
                    f"{path} reads {reported!r}, not the {usecs} requested {CONFIRM_DEADLINE_S:g} s ago "
                    "(VF reset or down, or its driver ignores host ITR)")))
            else:
                continue
            del self._confirm[pci]
        return out

    def _current_scan(self) -> SysfsScan:
        if self._scan is None:
            self.inventory()
        assert self._scan is not None
        return self._scan

    def _refresh_s(self, sysfs: SysfsScan) -> float:
        devs = sysfs.pf_devices.values()
        if devs and all(d.patched_itr for d in devs):
            return PATCHED_REFRESH_S
        # Stock PFs whose ethtool statistics can be read refresh their VFs' counters on demand.
        if devs and all(d.patched_itr or self._gstats.refresh(d.name) is not None for d in devs):
            return self._gstats.min_interval_s
        return STOCK_REFRESH_S

    # -- capabilities ----------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        sysfs = self._current_scan()
        devs = list(sysfs.pf_devices.values())
        missing: list[str] = []
        if not devs:
            missing.append(f"{self.sysfs_root}/class/net: no Intel 82599 PF found; nothing to tune")
        patched_itr = [d for d in devs if d.patched_itr]
        for d in devs:
            if not d.patched_itr and d.name in {vf.pf for vf in sysfs.vf_devices.values()}:
                missing.append(f"{d.name}: no per-VF ITR, {d.device_dir}/{pa.SRIOV_DIR}/ is absent "
                               "(stock ixgbe); its VFs are observed only")
        stock_knobs = all((d.net_dir / pa.NAPI_DEFER_HARD_IRQS).exists() and (d.net_dir / pa.GRO_FLUSH_TIMEOUT).exists()
                          for d in devs)
        modes: set[str] = set(RX_MODES)
        for d in devs:
            if d.patched_rxmode:
                continue
            modes.discard("hybrid")
            missing.append(f"{d.name}: no {d.device_dir}/{pa.RXMODE_DIR}/ (stock ixgbe): hybrid needs the patched "
                           f"driver; napi/de use {pa.NAPI_DEFER_HARD_IRQS} and {pa.GRO_FLUSH_TIMEOUT}")
            if not stock_knobs:
                modes.discard("de")
        budget_file = self.procfs_root / pa.NETDEV_BUDGET
        napi_budget = bool(devs) and all(
            d.patched_rxmode or os.access(budget_file, os.W_OK) for d in devs
        )
        if not napi_budget and devs:
            missing.append(f"no per-PF poll_limit and {budget_file} is not writable: NAPI budget fixed")
        if self._guests is not None:
            missing.extend(self._guest_view().errors)
        if self._drops_unavailable is not None:
            missing.append(self._drops_unavailable)
        return Capabilities(
            backend=self.name,
            vf_itr=bool(patched_itr) or self._guest_agent.enabled,
            vf_itr_bounds=bool(patched_itr),
            rx_modes=tuple(m for m in RX_MODES if m in modes) if devs else ("napi",),
            napi_budget=napi_budget,
            counter_refresh_s=self._refresh_s(sysfs),
            missing=tuple(missing),
            # A stock PF's VFs can still be tuned in their guests: the guest-agent wiring refuses per VF.
            vf_itr_unsupported_pfs=() if self._guest_agent.enabled else tuple(d.name for d in devs if not d.patched_itr),
        )

    # -- sampling ---------------------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def sleep(self, seconds: float) -> None:
        self._sleeper(seconds)

    def snapshot(self) -> Snapshot:
        if self.qemu_guests_changed():  # a guest's QEMU exited: its VFs are no longer its own
            self._qemu = QemuScan(tuple(g for g in self._qemu.guests if (self.procfs_root / str(g.pid)).exists()))
            for listener in list(self._listeners):
                listener()
        sysfs = self._current_scan()
        health = self._health
        assert health is not None
        errors: list[str] = []
        t = self.now()

        # Every source is read as bytes and parsed by a parser that raises only HostError, which
        # names the file: one bad source is a warning for this tick, never the end of the loop.
        interrupts: InterruptCounts | None = None
        irq_path, stat_path = self._proc_paths
        try:
            interrupts = parse_interrupts(read_source(irq_path), self._irq_memo)
        except HostError as exc:
            errors.append(str(exc))
        host_irq, host_cpus = 0.0, 1
        try:
            host = parse_proc_stat(read_source(stat_path), str(stat_path))
            host_irq, host_cpus = host.irq_seconds, host.cpus
        except HostError as exc:
            errors.append(str(exc))

        # Stock PFs: read their ethtool statistics first, which copies every VF's counters now.
        refreshed = {n for n, d in sysfs.pf_devices.items() if not d.patched_itr and self._gstats.refresh(n) is not None}
        links: dict[str, LinkStats] = {}
        pfs: dict[str, PfCounters] = {}
        for name, dev in sysfs.pf_devices.items():
            try:
                memo = self._vfinfo_memo.get(name)
                if memo is None:
                    memo = self._vfinfo_memo[name] = LinkMemo()
                link = links[name] = parse_link(self._source.link_reply(name), name, memo)
            except HostError as exc:
                errors.append(str(exc))
                continue
            pfs[name] = self._pf_counters(dev, link)

        vfs: dict[str, VfCounters] = {}
        macs_changed = False
        always_fresh = {n: d.patched_itr or n in refreshed for n, d in sysfs.pf_devices.items()}
        vfio = interrupts.vfio_by_pci if interrupts is not None else {}
        update, known_macs, make_counters = health.update, self._macs, make_vf_counters
        for pci, vf in sysfs.vf_devices.items():
            pf_link = links.get(vf.pf)
            if pf_link is None:
                continue
            stat = pf_link.vfs.get(vf.index)
            if stat is None:
                errors.append(f"{vf.pf} VF {vf.index} ({pci}): not in the PF's netlink VF list (VF removed?)")
                continue
            irqs = None
            if interrupts is not None:  # InterruptCounts.for_vf, its vfio-msix rows first
                irqs = vfio.get(pci)
                if irqs is None:
                    irqs = interrupts.for_vf(pci, vf.msi_irqs)
            h = update(pci, t, stat.rx_packets + stat.tx_packets, irqs, always_fresh[vf.pf])
            mac = stat.mac
            vfs[pci] = make_counters((stat.rx_packets, stat.rx_bytes, stat.tx_packets, stat.tx_bytes, irqs,
                                      h.counters_time, h.stale, h.interrupts_frozen, mac))
            if mac and known_macs.get(pci) != mac:
                known_macs[pci] = mac
                macs_changed = True

        if macs_changed:  # a VF got (or changed) its MAC: the guest agent finds its interface by it
            self._vf_infos = tuple(dataclasses.replace(vf, mac=self._macs.get(vf.pci)) for vf in self._vf_infos)
            self._guest_agent.sync(self._vf_infos, self._patched_refusal)
        guest_cpu: dict[str, float] = {}
        if self._guests is not None:
            for guest in {g.name: g for g in self._guests.view().by_pci.values()}.values():
                if guest.pid is None:
                    continue
                try:
                    guest_cpu[guest.name] = self._cpu.seconds(guest.pid)
                except HostError as exc:
                    errors.append(f"guest {guest.name}: {exc}")
        # What the guests' pollers last read, fresh ones only: never waits for a guest.
        readings = self._drops.latest_readings(t) if self._drops is not None else {}
        return Snapshot(time=t, vfs=vfs, pfs=pfs, guest_cpu=guest_cpu, host_irq_cpu=host_irq,
                        host_cpus=host_cpus, errors=tuple(errors),
                        guest_rx_drops={g: r.count for g, r in readings.items()},
                        guest_rx_drops_time={g: r.read_at for g, r in readings.items()},
                        guest_cpu_times={g: r.cpu for g, r in readings.items() if r.cpu is not None})

    def _pf_paths(self, dev: PfDevice) -> tuple[Path, ...]:
        """The files _pf_counters reads of a PF, built once per PF device (a scan's)."""
        held = self._pf_files.get(dev.name)
        if held is None or held[0] is not dev:
            paths = ((pa.rxmode(dev.device_dir, pa.RXMODE_CURRENT), pa.rxmode(dev.device_dir, pa.RXMODE_RATE_PPS),
                      pa.rxmode(dev.device_dir, pa.RXMODE_SWITCHES)) if dev.patched_rxmode
                     else (dev.net_dir / pa.NAPI_DEFER_HARD_IRQS,))
            held = self._pf_files[dev.name] = (dev, paths)
        return held[1]

    def _pf_counters(self, dev: PfDevice, link: LinkStats) -> PfCounters:
        mode = rate = switches = None
        paths = self._pf_paths(dev)
        if dev.patched_rxmode:
            mode = read_optional(paths[0])
            rate_text = read_optional(paths[1])
            sw_text = read_optional(paths[2])
            rate, switches = as_count(rate_text), as_count(sw_text)
        else:
            defer = read_optional(paths[0])
            defer_n = as_count(defer)
            if defer_n is not None:
                mode = "napi" if defer_n > 0 else "de"
        return PfCounters(rx_packets=link.rx_packets, rx_bytes=link.rx_bytes,
                          current_mode=mode, rate_pps=rate, switches=switches)

    # -- writes -------------------------------------------------------------------------

    def _rooted(self, path: Path) -> dict[str, str]:
        """A path as the journal keeps it: relative to its root, so `vftune restore --sysfs-root`
        follows the tree it is pointed at."""
        for name, root in (("sysfs", self.sysfs_root), ("procfs", self.procfs_root)):
            try:
                return {"root": name, "path": str(path.relative_to(root))}
            except ValueError:
                continue
        return {"root": "", "path": str(path)}

    def _unrooted(self, payload: dict[str, object]) -> Path:
        roots = {"sysfs": self.sysfs_root, "procfs": self.procfs_root}
        root = roots.get(str(payload.get("root", "")))
        rel = str(payload.get("path", ""))
        return root / rel if root is not None else Path(rel)

    def _check_writable_now(self) -> None:
        if self._stopping:
            raise HostError("agent is stopping: no new writes after restore began")

    def _journal_first(self, kind: str, path: Path, setting: str, payload: dict[str, object]) -> bool:
        """Commit the original before the write, so a crash between the two loses nothing."""
        try:
            return self._journal.remember(kind, str(path), setting, {**self._rooted(path), **payload})
        except JournalError as exc:
            raise HostError(str(exc)) from None

    def _guarded_write(self, kind: str, path: Path, setting: str, payload: dict[str, object], value: str) -> None:
        new = self._journal_first(kind, path, setting, payload)
        try:
            write_text(path, value)
        except HostError:
            if new:
                self._journal.discard(str(path), setting)
            raise

    def _write_sysfs(self, path: Path, value: int | str) -> tuple[str, str]:
        """Journal the first old value, write, read back. Returns (old, now)."""
        self._check_writable_now()
        old = read_text(path)
        self._guarded_write(KIND_SYSFS, path, "sysfs", {"old": old}, str(value))
        return old, read_text(path)

    @staticmethod
    def _failed(target: str, setting: str, requested: SettingValue, error: str, old: SettingValue = None) -> Applied:
        log.debug("%s %s=%s failed: %s", target, setting, requested, error)  # the agent reports it
        return Applied(target, setting, requested, old, None, ok=False, error=error)

    def set_vf_itr(self, vf_pci: str, itr: int) -> Applied:
        sysfs = self._current_scan()
        vf = sysfs.vf_devices.get(vf_pci)
        if vf is None:
            return self._failed(vf_pci, "itr", itr, f"{vf_pci}: not a VF of a managed 82599 PF")
        dev = sysfs.pf_devices[vf.pf]
        usecs = pa.ITR_ADAPTIVE if itr <= 0 else itr_to_usecs(itr)
        choice = self._guest_agent.status(vf_pci)
        held = any(v.pci == vf_pci and v.guest is not None for v in self._vf_infos)
        if held and self._guest_agent.enabled and choice is not None and choice.actuator == "none" \
                and not self._guest_agent.handles(vf_pci):
            return self._failed(vf_pci, "itr", itr, choice.reason)  # e.g. its MAC not known yet: retried later
        if self._guest_agent.handles(vf_pci):  # asynchronous: the outcome comes from collect_applied()
            if self._stopping:
                return self._failed(vf_pci, "itr", itr, "agent is stopping: no new writes after restore began")
            return self._guest_agent.submit(vf_pci, itr)
        if not dev.patched_itr:
            return self._failed(vf_pci, "itr", itr, f"{dev.device_dir}/{pa.SRIOV_DIR}: absent, {vf.pf} runs "
                                "stock ixgbe without per-VF ITR")
        itr_path = pa.vf_itr_usecs(dev.device_dir, vf.index)
        try:
            self._check_writable_now()
            if read_text(pa.vf_itr_capable(dev.device_dir, vf.index)) != "1":
                return self._failed(vf_pci, "itr", itr, f"{pa.vf_itr_capable(dev.device_dir, vf.index)} is 0: "
                                    "the VF driver has not negotiated per-VF ITR")
            old = read_text(itr_path)
            # What the VF ran before our first request: restore() has to ask for it explicitly,
            # because writing the old "0" back only withdraws a request (vfdriver-patches/README.md).
            ran = read_text(pa.vf_itr_applied_usecs(dev.device_dir, vf.index))
            self._guarded_write(KIND_VF_ITR, itr_path, "vf_itr",
                                {"old_request": old, "ran_usecs": as_count(ran) or 0}, str(usecs))
            now = read_text(itr_path)
        except HostError as exc:
            return self._failed(vf_pci, "itr", itr, str(exc))
        old_n, now_n = as_count(old), as_count(now)
        if old_n is None or now_n is None:
            return self._failed(vf_pci, "itr", itr, f"{itr_path}: reads back {now!r} (was {old!r}), not a number")
        if as_count(ran) == usecs:
            # The VF already runs it (a search's first probe is written to speed up the VF's
            # fetch, vfdriver-patches 0014): in force now, and no earlier request is on its way.
            self._confirm.pop(vf_pci, None)
            return Applied(vf_pci, "itr", itr, usecs_to_itr(old_n), usecs_to_itr(now_n))
        # The VF takes the request at its next fetch (within VF_CONFIRM_S), not now: the write
        # is pending until _confirmations() sees it in force, so no window counts the old rate.
        self._confirm[vf_pci] = (pa.vf_itr_applied_usecs(dev.device_dir, vf.index), usecs,
                                 self._clock() + CONFIRM_DEADLINE_S)
        return Applied(vf_pci, "itr", itr, usecs_to_itr(old_n), usecs_to_itr(now_n), pending=True)

    def set_vf_itr_bounds(self, vf_pci: str, min_itr: int, max_itr: int) -> Applied:
        """The patched PF's itr_min_usecs / itr_max_usecs, written in an order that never crosses."""
        requested = f"{min_itr}..{max_itr}"
        sysfs = self._current_scan()
        vf = sysfs.vf_devices.get(vf_pci)
        if vf is None:
            return self._failed(vf_pci, "itr_bounds", requested, f"{vf_pci}: not a VF of a managed 82599 PF")
        for name, rate in (("min", min_itr), ("max", max_itr)):
            if rate != 0 and not ITR_MIN_RATE <= rate <= ITR_MAX_RATE:
                return self._failed(vf_pci, "itr_bounds", requested, f"{vf_pci}: {name} ITR {rate} outside "
                                    f"{ITR_MIN_RATE}..{ITR_MAX_RATE} interrupts/s (0 = open)")
        if min_itr and max_itr and min_itr > max_itr:
            return self._failed(vf_pci, "itr_bounds", requested, f"{vf_pci}: min ITR {min_itr} above max {max_itr}")
        dev = sysfs.pf_devices[vf.pf]
        if not dev.patched_itr:
            return self._failed(vf_pci, "itr_bounds", requested, f"{dev.device_dir}/{pa.SRIOV_DIR}: absent, {vf.pf} "
                                "runs stock ixgbe without per-VF ITR bounds")
        min_path, max_path = pa.vf_itr_min_usecs(dev.device_dir, vf.index), pa.vf_itr_max_usecs(dev.device_dir, vf.index)
        new_min, new_max = itr_bounds_to_usecs(min_itr, max_itr)
        try:
            self._check_writable_now()
            old_min, old_max = self._read_bounds(min_path, max_path)
            new = self._journal_first(KIND_VF_ITR_BOUNDS, min_path, "itr_bounds", {"old_min": old_min, "old_max": old_max})
            try:
                self._write_bounds(min_path, max_path, new_min, new_max)
            except HostError:
                if new and self._read_bounds(min_path, max_path) == (old_min, old_max):
                    self._journal.discard(str(min_path), "itr_bounds")
                raise
            now = self._read_bounds(min_path, max_path)
        except HostError as exc:
            return self._failed(vf_pci, "itr_bounds", requested, str(exc))
        old_rates, now_rates = usecs_bounds_to_itr(old_min, old_max), usecs_bounds_to_itr(*now)
        ok = now == (new_min, new_max)
        return Applied(vf_pci, "itr_bounds", requested, "{}..{}".format(*old_rates), "{}..{}".format(*now_rates), ok=ok,
                       error=None if ok else f"{min_path.parent}: bounds read back {now[0]}..{now[1]} us, "
                       f"not {new_min}..{new_max}")

    @staticmethod
    def _read_bounds(min_path: Path, max_path: Path) -> tuple[int, int]:
        values = []
        for path in (min_path, max_path):
            text = read_text(path)
            value = as_count(text)
            if value is None:
                raise HostError(f"{path}: reads {text!r:.40}, not a number")
            values.append(value)
        return values[0], values[1]

    @staticmethod
    def _write_bounds(min_path: Path, max_path: Path, new_min: int, new_max: int) -> None:
        """Never let min pass max on the way (ERANGE): raise max before min, else min first."""
        old_max = as_count(read_text(max_path)) or 0
        if new_min and old_max and new_min > old_max:
            write_text(max_path, str(new_max))
            write_text(min_path, str(new_min))
        else:
            write_text(min_path, str(new_min))
            write_text(max_path, str(new_max))

    def set_pf_rx_mode(self, pf: str, mode: str, napi_budget: int | None = None,
                       cliff_pps: float | None = None, epsilon: float | None = None) -> Applied:
        dev = self._current_scan().pf_devices.get(pf)
        if dev is None:
            return self._failed(pf, "rx_mode", mode, f"{pf}: not a managed 82599 PF")
        if mode not in RX_MODES:
            return self._failed(pf, "rx_mode", mode, f"{pf}: unknown rx mode {mode!r} (napi, de, hybrid)")
        try:
            if dev.patched_rxmode:
                if napi_budget is not None:
                    if not 1 <= napi_budget <= pa.POLL_LIMIT_MAX:
                        return self._failed(pf, "rx_mode", mode, f"{pf}: napi budget {napi_budget} out of range "
                                            f"1..{pa.POLL_LIMIT_MAX}")
                    self._write_sysfs(pa.rxmode(dev.device_dir, pa.RXMODE_POLL_LIMIT), napi_budget)
                # The thresholds go in before the mode, so hybrid never runs on stale ones.
                if cliff_pps is not None:
                    if not 1 <= cliff_pps <= pa.CLIFF_PPS_MAX:
                        return self._failed(pf, "rx_mode", mode, f"{pf}: cliff {cliff_pps:.0f} packets/s out of "
                                            f"range 1..{pa.CLIFF_PPS_MAX}")
                    self._write_sysfs(pa.rxmode(dev.device_dir, pa.RXMODE_CLIFF_PPS), int(round(cliff_pps)))
                if epsilon is not None:
                    if not 0 <= epsilon <= 1:
                        return self._failed(pf, "rx_mode", mode, f"{pf}: epsilon {epsilon} out of range 0..1")
                    self._write_sysfs(pa.rxmode(dev.device_dir, pa.RXMODE_EPSILON_PCT), int(round(epsilon * 100)))
                old, now = self._write_sysfs(pa.rxmode(dev.device_dir, pa.RXMODE_MODE), mode)
                return Applied(pf, "rx_mode", mode, old, now, ok=now == mode,
                               error=None if now == mode else f"{pf}: rxmode/mode reads back {now!r}")
            if mode == "hybrid":
                return self._failed(pf, "rx_mode", mode, f"{dev.device_dir}/{pa.RXMODE_DIR}: absent, hybrid needs "
                                    "the patched ixgbe")
            defer, gro = (STOCK_NAPI_DEFER, STOCK_NAPI_GRO_FLUSH_NS) if mode == "napi" else (0, 0)
            if napi_budget is not None:
                self._write_sysfs(self.procfs_root / pa.NETDEV_BUDGET, napi_budget)
            self._write_sysfs(dev.net_dir / pa.GRO_FLUSH_TIMEOUT, gro)
            old_defer, now_defer = self._write_sysfs(dev.net_dir / pa.NAPI_DEFER_HARD_IRQS, defer)
        except HostError as exc:
            return self._failed(pf, "rx_mode", mode, str(exc))
        as_mode = {True: "napi", False: "de"}
        old_n, now_n = as_count(old_defer), as_count(now_defer)
        if old_n is None or now_n is None:
            return self._failed(pf, "rx_mode", mode, f"{dev.net_dir / pa.NAPI_DEFER_HARD_IRQS}: reads back "
                                f"{now_defer!r}, not a number")
        return Applied(pf, "rx_mode", mode, as_mode[old_n > 0], as_mode[now_n > 0])

    # -- restore ----------------------------------------------------------------------------

    def restore(self, forget_gone: bool = True, forget_absent: bool = False) -> list[Applied]:
        """Put back every original the journal holds, this run's and any an unclean stop left.
        Entries whose device is not under the roots are kept unless forget_absent."""
        self._ask_back_vf_settings()
        return self._journal.restore(forget_gone=forget_gone, forget_absent=forget_absent)

    def _ask_back_vf_settings(self) -> None:
        """Before withdrawing vftune's requests, ask each VF for what it ran before them and wait
        until it took that: the VF applies a request only at its next fetch (within
        VF_CONFIRM_S), and a withdrawn request (0) leaves it at whatever it runs then, which
        without the wait would be vftune's rate. A VF that does not show its setting within
        CONFIRM_DEADLINE_S (down, reset, or a driver that ignores host ITR) is not waited for."""
        waiting: list[tuple[Path, int]] = []
        for entry in self._journal.pending():
            if entry.kind != KIND_VF_ITR or str(entry.payload.get("old_request")) != str(pa.ITR_LEAVE_ALONE):
                continue
            ran = entry.payload.get("ran_usecs", 0)
            usecs = ran if isinstance(ran, int) and ran >= pa.ITR_ADAPTIVE else pa.ITR_ADAPTIVE
            try:
                path = self._entry_path(entry)
                before = read_text(path)
                if before != str(usecs):
                    write_text(path, str(usecs))
                    self._asked_back[str(path)] = before
            except (TargetGone, TargetAbsent, HostError):
                continue  # the entry's own restore says what is wrong
            waiting.append((path.parent / pa.VF_ITR_APPLIED_USECS, usecs))
        start = self._clock()
        while waiting:
            elapsed = self._clock() - start
            waiting = [(p, u) for p, u in waiting if read_optional(p) != str(u)]
            if not waiting or elapsed >= CONFIRM_DEADLINE_S:
                break
            self._sleeper(0.1)

    def stop(self) -> None:
        self._stopping = True

    def _entry_anchor(self, payload: dict[str, object]) -> Path:
        """What must exist under the root for an entry to be this host's: the deepest PCI
        device its path names, else its interface, else its directory."""
        rel = Path(str(payload.get("path", "")))
        root = self.sysfs_root if payload.get("root") == "sysfs" else None
        if root is not None:
            devices = [part for part in rel.parts if PCI_ADDRESS.fullmatch(part)]
            if devices:
                return root / "bus" / "pci" / "devices" / devices[-1]
            if rel.parts[:2] == ("class", "net") and len(rel.parts) > 2:
                return root.joinpath(*rel.parts[:3])
        return self._unrooted(payload).parent

    def _entry_path(self, entry: JournalEntry) -> Path:
        path = self._unrooted(entry.payload)
        if not path.exists():
            anchor = self._entry_anchor(entry.payload)
            if not anchor.exists():
                raise TargetAbsent(f"{path}: {anchor} is not there (is the root the host that was tuned?)")
            raise TargetGone(f"{path}: no longer exists")
        return path

    def _restore_sysfs_entry(self, entry: JournalEntry) -> Applied:
        path = self._entry_path(entry)
        old = str(entry.payload.get("old", ""))
        try:
            before = read_text(path)
            write_text(path, old)
            now = read_text(path)
        except HostError as exc:
            return self._failed(str(path), path.name, old, str(exc))
        return Applied(str(path), path.name, old, before, now, ok=now == old,
                       error=None if now == old else f"{path}: reads back {now!r} after writing {old!r}")

    def _restore_vf_itr_entry(self, entry: JournalEntry) -> Applied:
        ran = entry.payload.get("ran_usecs", 0)
        return self._restore_vf_itr(self._entry_path(entry), str(entry.payload.get("old_request", "0")),
                                    ran if isinstance(ran, int) else 0)

    def _restore_guest_agent_entry(self, entry: JournalEntry) -> Applied:
        """Inside the guest, through its agent; a guest that is gone or stopped took the setting
        with it (the VF resets at its next start), so its entry is dropped."""
        original = guest_original(entry)
        if not isinstance(original, GuestOriginal):
            raise TargetGone(f"{entry.target}: guest-agent journal entry unreadable: {original}")
        guest = original.vf.guest
        conn = self._guests.connection() if self._guests is not None else None
        if conn is not None:
            libvirt = import_libvirt()
            try:
                active = conn.lookupByName(guest).isActive()
            except libvirt.libvirtError as exc:
                raise TargetGone(f"guest {guest}: {exc.get_error_message() or exc}") from None
            if not active:
                raise TargetGone(f"guest {guest} is not running: its {original.ifname} setting went with it")
        return self._guest_agent.restore_entries([original])[0]

    def _restore_bounds_entry(self, entry: JournalEntry) -> Applied:
        """Both bounds back to what the VF had (0, none, unless someone else set them), safely ordered."""
        min_path = self._entry_path(entry)
        max_path = min_path.with_name(pa.VF_ITR_MAX_USECS)
        old_min, old_max = entry.payload.get("old_min", 0), entry.payload.get("old_max", 0)
        want = (old_min if isinstance(old_min, int) else 0, old_max if isinstance(old_max, int) else 0)
        target, text = str(min_path.parent), "{}..{}".format(*want)
        try:
            before = "{}..{}".format(*self._read_bounds(min_path, max_path))
            self._write_bounds(min_path, max_path, *want)
            now = "{}..{}".format(*self._read_bounds(min_path, max_path))
        except HostError as exc:
            return self._failed(target, "itr_bounds", text, str(exc))
        return Applied(target, "itr_bounds", text, before, now, ok=now == text,
                       error=None if now == text else f"{target}: bounds read back {now} us, not {text}")

    def _restore_vf_itr(self, path: Path, old_request: str, ran_usecs: int) -> Applied:
        """Put back the VF's own setting, then the old request: 0 ("no request") keeps what the VF runs.

        A VF that reported 0 (no throttling) cannot be asked for that (0 means "no request"), and
        one that never reported ran ixgbevf's default: both get adaptive (1)."""
        try:
            now = read_text(path)
            before = self._asked_back.pop(str(path), now)  # what vftune had set, not the asking back
            own = str(ran_usecs if ran_usecs >= pa.ITR_ADAPTIVE else pa.ITR_ADAPTIVE)
            if old_request == str(pa.ITR_LEAVE_ALONE) and now != own:
                write_text(path, own)
            write_text(path, old_request)
            now = read_text(path)
        except HostError as exc:
            return self._failed(str(path), path.name, old_request, str(exc))
        return Applied(str(path), path.name, old_request, before, now, ok=now == old_request,
                       error=None if now == old_request else f"{path}: reads back {now!r}")

    def close(self) -> None:
        if self._drops is not None:
            self._drops.close()
        self._guest_agent.close()
        if self._guests is not None:
            self._guests.stop()
        self._source.close()
        self._gstats.close()

    @property
    def counter_refresh_cost(self) -> dict[str, dict[str, object]]:
        """ETHTOOL_GSTATS reads per PF: how many, their mean and worst wall time, errors."""
        return {pf: c.as_dict() for pf, c in self._gstats.cost.items()}

    # -- for tests and the CLI -----------------------------------------------------------------

    def libvirt_connection(self) -> Any:
        return self._guests.connection() if self._guests is not None else None
