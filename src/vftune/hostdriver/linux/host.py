"""LinuxHost: the HostDriver for a real KVM host (sysfs, procfs, netlink, ethtool, libvirt).

Roots are configurable as node_exporter's --path.sysfs / --path.procfs are, so the same code
runs on a fixture tree. Every write is read back and its old value journaled; restore()
puts everything back. Expected failures come back as Applied(ok=False) plus a log line.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vftune.hostdriver.base import HostDriver, HostError
from vftune.hostdriver.linux import patched_attrs as pa
from vftune.hostdriver.linux.counter_health import CounterHealth
from vftune.hostdriver.linux.cpu import ProcessCpu, parse_proc_stat
from vftune.hostdriver.linux.ethtool_stats import EthtoolStatsRefresher
from vftune.hostdriver.linux.libvirt_guests import GuestDirectory, GuestView
from vftune.hostdriver.linux.netlink_vfstats import LinkStats, as_source, parse_link
from vftune.hostdriver.linux.proc_interrupts import InterruptCounts, parse_interrupts
from vftune.hostdriver.linux.sysfs_inventory import PfDevice, SysfsScan, scan
from vftune.hostdriver.linux.sysfs_io import as_count, read_optional, read_source, read_text, write_text
from vftune.itr import itr_to_usecs, usecs_to_itr
from vftune.model import RX_MODES, Applied, Capabilities, Inventory, PfCounters, SettingValue, Snapshot, VfCounters
from vftune.store.journal import Journal, JournalEntry, JournalError, TargetGone

log = logging.getLogger("vftune.linux")

# Stock-kernel stand-in for "stay in polling" (Salim's parked state): defer hard IRQs for two
# empty polls, re-arm after 200 us. The stock default (0, 0) re-enables the interrupt after
# every poll, which at low load is one interrupt per packet: "de".
STOCK_NAPI_DEFER = 2
STOCK_NAPI_GRO_FLUSH_NS = 200_000
PATCHED_REFRESH_S = 0.01  # patched PF: one hardware read per VF per 10 ms
STOCK_REFRESH_S = 2.0  # stock ixgbe service task


# Journal entry kinds (store/journal.py): what restore() needs to put one write back.
KIND_SYSFS = "sysfs"  # payload: root ("sysfs"/"procfs"/""), path under it, old text
KIND_VF_ITR = "vf_itr"  # payload: root, path of the patched PF's per-VF itr_usecs, old_request, ran_usecs
KIND_GUEST_AGENT = "guest_agent"  # payload: vf, guest, ifname, usecs to ask for on restore


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
        guest_agent_itr: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleeper: Callable[[float], None] = time.sleep,
        libvirt_wait_s: float = 5.0,
        journal: Journal | None = None,
        counter_refresh: EthtoolStatsRefresher | None = None,
    ) -> None:
        """netlink: None opens pyroute2's IPRoute; an IPRoute (e.g. in a netns) or any object with
        link_reply(ifname) -> wire bytes is used instead.
        guest_agent_itr: VF PCI address -> interface name inside its guest, for guests whose
        ITR is pushed through the QEMU guest agent (off unless listed).
        journal: where originals are kept until restored; None keeps them in this process only.
        counter_refresh: reads stock PFs' ethtool statistics so VF counters are fresh each
        snapshot (ethtool_stats.py); None opens one in this network namespace."""
        self.sysfs_root = Path(sysfs_root)
        self.procfs_root = Path(procfs_root)
        self.libvirt_uri = libvirt_uri
        self._source = as_source(netlink)
        self._guest_agent_itr = dict(guest_agent_itr or {})
        self._clock = clock
        self._sleeper = sleeper
        self._libvirt_wait_s = libvirt_wait_s
        self._journal = journal if journal is not None else Journal.memory()
        self._journal.register(KIND_SYSFS, self._restore_sysfs_entry)
        self._journal.register(KIND_VF_ITR, self._restore_vf_itr_entry)
        self._journal.register(KIND_GUEST_AGENT, self._restore_guest_agent_entry)
        self._stopping = False  # set by stop(): no write after the final restore has begun
        self._gstats = counter_refresh if counter_refresh is not None else EthtoolStatsRefresher()
        self._cpu = ProcessCpu(self.procfs_root)
        self._scan: SysfsScan | None = None
        self._health: CounterHealth | None = None
        self._inventory_lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._guests: GuestDirectory | None = None
        if libvirt_uri:
            self._guests = GuestDirectory(
                libvirt_uri, self.procfs_root, Path(run_root), on_change=self._on_guests_changed
            )

    # -- inventory ----------------------------------------------------------------

    def _on_guests_changed(self, view: GuestView) -> None:
        for listener in list(self._listeners):
            listener()

    def add_inventory_listener(self, listener: Callable[[], None]) -> None:
        """Called (on libvirt's worker thread) when guests start or stop: time to call inventory()."""
        self._listeners.append(listener)

    def _guest_view(self) -> GuestView:
        if self._guests is None:
            return GuestView()
        return self._guests.start(self._libvirt_wait_s)

    @property
    def inventory_errors(self) -> tuple[str, ...]:
        """Why guests may be missing from the inventory (libvirt down, unreadable domain XML)."""
        return self._guests.view().errors if self._guests is not None else ()

    def inventory(self) -> Inventory:
        sysfs = scan(self.sysfs_root)
        guests = self._guest_view().by_pci
        pfs = tuple(
            dataclasses.replace(pf, vfs=tuple(dataclasses.replace(vf, guest=guests.get(vf.pci)) for vf in pf.vfs))
            for pf in sysfs.pfs
        )
        self._gstats.forget()
        with self._inventory_lock:
            self._scan = sysfs
            if self._health is None:
                self._health = CounterHealth(self._refresh_s(sysfs))
            self._health.refresh_s = self._refresh_s(sysfs)
            self._health.forget(set(sysfs.vf_devices))
        return Inventory(pfs=pfs, ignored=sysfs.ignored)

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
        return Capabilities(
            backend=self.name,
            vf_itr=bool(patched_itr) or bool(self._guest_agent_itr),
            rx_modes=tuple(m for m in RX_MODES if m in modes) if devs else ("napi",),
            napi_budget=napi_budget,
            counter_refresh_s=self._refresh_s(sysfs),
            missing=tuple(missing),
            vf_itr_unsupported_pfs=() if self._guest_agent_itr else tuple(d.name for d in devs if not d.patched_itr),
        )

    # -- sampling ---------------------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def sleep(self, seconds: float) -> None:
        self._sleeper(seconds)

    def snapshot(self) -> Snapshot:
        sysfs = self._current_scan()
        health = self._health
        assert health is not None
        errors: list[str] = []
        t = self.now()

        # Every source is read as bytes and parsed by a parser that raises only HostError, which
        # names the file: one bad source is a warning for this tick, never the end of the loop.
        interrupts: InterruptCounts | None = None
        irq_path = self.procfs_root / "interrupts"
        try:
            interrupts = parse_interrupts(read_source(irq_path))
        except HostError as exc:
            errors.append(str(exc))
        host_irq, host_cpus = 0.0, 1
        stat_path = self.procfs_root / "stat"
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
                link = links[name] = parse_link(self._source.link_reply(name), name)
            except HostError as exc:
                errors.append(str(exc))
                continue
            pfs[name] = self._pf_counters(dev, link)

        vfs: dict[str, VfCounters] = {}
        for pci, vf in sysfs.vf_devices.items():
            pf_link = links.get(vf.pf)
            if pf_link is None:
                continue
            stat = pf_link.vfs.get(vf.index)
            if stat is None:
                errors.append(f"{vf.pf} VF {vf.index} ({pci}): not in the PF's netlink VF list (VF removed?)")
                continue
            irqs = interrupts.for_vf(pci, vf.msi_irqs) if interrupts is not None else None
            h = health.update(pci, t, stat.rx_packets + stat.tx_packets, irqs,
                              always_fresh=sysfs.pf_devices[vf.pf].patched_itr or vf.pf in refreshed)
            vfs[pci] = VfCounters(
                rx_packets=stat.rx_packets, rx_bytes=stat.rx_bytes,
                tx_packets=stat.tx_packets, tx_bytes=stat.tx_bytes,
                interrupts=irqs, counters_time=h.counters_time, stale=h.stale, interrupts_frozen=h.interrupts_frozen,
            )

        guest_cpu: dict[str, float] = {}
        if self._guests is not None:
            for guest in {g.name: g for g in self._guests.view().by_pci.values()}.values():
                if guest.pid is None:
                    continue
                try:
                    guest_cpu[guest.name] = self._cpu.seconds(guest.pid)
                except HostError as exc:
                    errors.append(f"guest {guest.name}: {exc}")
        return Snapshot(time=t, vfs=vfs, pfs=pfs, guest_cpu=guest_cpu, host_irq_cpu=host_irq,
                        host_cpus=host_cpus, errors=tuple(errors))

    def _pf_counters(self, dev: PfDevice, link: LinkStats) -> PfCounters:
        mode = rate = switches = None
        if dev.patched_rxmode:
            mode = read_optional(pa.rxmode(dev.device_dir, pa.RXMODE_CURRENT))
            rate_text = read_optional(pa.rxmode(dev.device_dir, pa.RXMODE_RATE_PPS))
            sw_text = read_optional(pa.rxmode(dev.device_dir, pa.RXMODE_SWITCHES))
            rate, switches = as_count(rate_text), as_count(sw_text)
        else:
            defer = read_optional(dev.net_dir / pa.NAPI_DEFER_HARD_IRQS)
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
        if not dev.patched_itr:
            if vf_pci in self._guest_agent_itr:
                return self._push_via_guest_agent(vf_pci, itr, usecs)
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
        return Applied(vf_pci, "itr", itr, usecs_to_itr(old_n), usecs_to_itr(now_n))

    def _push_via_guest_agent(self, vf_pci: str, itr: int, usecs: int) -> Applied:
        guest = (self._guests.view().by_pci.get(vf_pci) if self._guests is not None else None)
        if guest is None or self._guests is None:
            return self._failed(vf_pci, "itr", itr, f"{vf_pci}: no running guest holds this VF")
        ifname = self._guest_agent_itr[vf_pci]
        try:
            self._check_writable_now()
            # ixgbevf's default is adaptive (1); that is what restore() puts back.
            try:
                new = self._journal.remember(KIND_GUEST_AGENT, vf_pci, "guest_agent", {
                    "vf": vf_pci, "guest": guest.name, "ifname": ifname, "usecs": pa.ITR_ADAPTIVE})
            except JournalError as exc:
                raise HostError(str(exc)) from None
            try:
                self._guests.agent_set_rx_usecs(guest.name, ifname, usecs)
            except HostError:
                if new:
                    self._journal.discard(vf_pci, "guest_agent")
                raise
        except HostError as exc:
            return self._failed(vf_pci, "itr", itr, str(exc))
        return Applied(vf_pci, "itr", itr, None, usecs_to_itr(usecs))

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

    def restore(self) -> list[Applied]:
        """Put back every original the journal holds, this run's and any an unclean stop left."""
        return self._journal.restore()

    def stop(self) -> None:
        self._stopping = True

    def _entry_path(self, entry: JournalEntry) -> Path:
        path = self._unrooted(entry.payload)
        if not path.exists():
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
        p = entry.payload
        vf, usecs = str(p.get("vf", entry.target)), p.get("usecs", pa.ITR_ADAPTIVE)
        if self._guests is None:
            return self._failed(vf, "itr", 0, "no libvirt connection (--libvirt-uri none): guest agent "
                                "entry kept")
        try:
            self._guests.agent_set_rx_usecs(str(p.get("guest")), str(p.get("ifname")),
                                            usecs if isinstance(usecs, int) else pa.ITR_ADAPTIVE)
        except HostError as exc:
            return self._failed(vf, "itr", 0, str(exc))
        return Applied(vf, "itr", 0, None, 0)

    def _restore_vf_itr(self, path: Path, old_request: str, ran_usecs: int) -> Applied:
        """Put back the VF's own setting, then the old request: 0 ("no request") keeps what the VF runs.

        A VF that reported 0 (no throttling) cannot be asked for that (0 means "no request"), and
        one that never reported ran ixgbevf's default: both get adaptive (1)."""
        try:
            before = read_text(path)
            if old_request == str(pa.ITR_LEAVE_ALONE):
                write_text(path, str(ran_usecs if ran_usecs >= pa.ITR_ADAPTIVE else pa.ITR_ADAPTIVE))
            write_text(path, old_request)
            now = read_text(path)
        except HostError as exc:
            return self._failed(str(path), path.name, old_request, str(exc))
        return Applied(str(path), path.name, old_request, before, now, ok=now == old_request,
                       error=None if now == old_request else f"{path}: reads back {now!r}")

    def close(self) -> None:
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
