"""The QEMU guest agent actuator: a VF's rx-usecs set inside its guest with the guest's ethtool.

For hosts whose guests run the stock ixgbevf: the host cannot reach the VF's ITR, the guest's
own `ethtool -C` can, through the guest agent (libvirt's qemuAgentCommand, or the agent's UNIX
socket where libvirt is absent). Contract for the backend and the CLI:

    act = GuestAgentActuator(libvirt_connector(directory.connection) or socket_connector(path_for),
                             journal=hook, limits=Limits())
    act.attach(GuestVf(pci, guest_name, mac))   # inventory time, and again on the guest's
                                                # start/restart or agent-connected event
    act.status(pci) -> VfAgentStatus | None     # actuator "guest-agent" | "none", reason, ifname
    act.submit(pci, rx_usecs) -> Submitted      # on the tick: never blocks; 0 off, 1 adaptive
    act.collect() -> list[Applied]              # on the tick: finished writes, read back
    act.restore(entries, deadline_s)            # on stop, at start-up after a crash, and
                                                # before detach() on an owner change: blocks
    act.detach(pci); act.close()

- Never on the tick's time: one worker thread per guest makes every agent call; submit(),
  collect(), status(), attach() and detach() only touch memory under a lock. Every agent call
  has a deadline (Limits.call_timeout_s), every job one more (Limits.job_deadline_s), both in
  real time; a hung agent costs its own VFs' writes, never the caller.
- The check (on attach, and again after a failed one once its backoff ends): guest-info must
  answer and allow guest-network-get-interfaces, guest-exec and guest-exec-status; exactly
  one interface must carry the VF's MAC (a bridge, VLAN or bond sharing it is told apart by
  `ethtool -P`, or reported). Passing makes status "guest-agent", failing "none" with why.
- Every write: the interface is found again by MAC (restarts, renames), `ethtool -c` first;
  before the first write since attach() or restore() the journal hook gets the guest's own
  setting (persist it durably with Coalesce.as_dict(); if the hook raises, nothing is
  written); `ethtool -C` through guest-exec, polled with guest-exec-status to completion, a
  non-zero exit or any stderr is a failed write carrying the guest's message; `ethtool -c`
  again: Applied.applied is what the guest reports (rx-usecs, 1 when adaptive), ok only when
  it equals the request. A value read back within Limits.reverify_s is not written again.
- No retry storm: jobs on one guest start Limits.guest_min_interval_s apart, a newer submit()
  replaces a request not yet started, and each failure doubles the VF's backoff (10 s up to
  600 s) during which submit() refuses with the reason; only a write that worked clears it.
- restore(RestoreEntry(vf, original, expect)): puts `original` back unless the guest now reads
  neither `expect` (what vftune last saw applied) nor the original, i.e. someone else set it.

The same agents also tell what the VF counters cannot: GuestDropsReader (socket_drops.py) reads
each VF-owning guest's UDP RcvbufErrors from its /proc/net/snmp{,6} with guest-file-*, on one
poller thread per guest; track(guests) at inventory time, latest(now) on the tick (counts read
within 2 s only), close() on stop.
"""

from vftune.hostdriver.linux.guest_agent.actuator import (
    GuestAgentActuator,
    GuestVf,
    Limits,
    RestoreEntry,
    Submitted,
    VfAgentStatus,
    libvirt_connector,
    socket_connector,
)
from vftune.hostdriver.linux.guest_agent.ethtool_text import Coalesce, Unparsable, parse_coalesce
from vftune.hostdriver.linux.guest_agent.protocol import (
    AgentChannel,
    AgentError,
    ExecResult,
    LibvirtChannel,
    UnixSocketChannel,
    guest_exec,
)
from vftune.hostdriver.linux.guest_agent.socket_drops import DropsLimits, GuestDropsReader

__all__ = [
    "AgentChannel", "AgentError", "Coalesce", "DropsLimits", "ExecResult", "GuestAgentActuator", "GuestDropsReader",
    "GuestVf", "Limits",
    "LibvirtChannel", "RestoreEntry", "Submitted", "Unparsable", "UnixSocketChannel", "VfAgentStatus",
    "guest_exec", "libvirt_connector", "parse_coalesce", "socket_connector",
]
