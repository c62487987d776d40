"""The QEMU guest agent actuator: a VF's rx-usecs set inside its guest with the guest's ethtool.

For hosts whose guests run the stock ixgbevf: the host cannot reach the VF's ITR, the guest's
own `ethtool -C` can, through the guest agent (libvirt's qemuAgentCommand, or the agent's UNIX
socket where libvirt is absent). Contract for the backend and the CLI:

    act = GuestAgentActuator(libvirt_connector(conn) or socket_connector(path_for),
                             journal=hook, limits=Limits())
    act.attach(GuestVf(pci, guest_name, mac))   # at inventory time; mac = IFLA_VF_MAC
    act.status(pci) -> VfAgentStatus            # actuator "guest-agent" | "none", reason, ifname
    act.submit(pci, rx_usecs) -> Submitted      # on the tick: never blocks; 0 off, 1 adaptive
    act.collect() -> list[Applied]              # on the tick: finished writes, read back
    act.restore(entries, deadline_s)            # on stop and at start-up after a crash: blocks
    act.detach(pci); act.close()

- Never on the tick's time: one worker thread per guest makes every agent call; submit(),
  collect(), status(), attach() and detach() only touch memory under a lock. Every agent call
  has a deadline (Limits.call_timeout_s), every job one more (Limits.job_deadline_s).
- Discovery: each job matches the VF's MAC against guest-network-get-interfaces (a VLAN or bond
  sharing it is told apart by `ethtool -P`); a MAC not seen is reported with the names seen.
- Every write: `ethtool -c` first; before the first write since attach() the journal hook gets
  the guest's own setting (it must persist it durably; if it raises, nothing is written);
  `ethtool -C` through guest-exec, polled with guest-exec-status to completion, a non-zero exit
  or any stderr is a failed write with the guest's message; `ethtool -c` again: Applied.applied
  is what the guest reports (rx-usecs, 1 when adaptive), ok only when it equals the request.
- No retry storm: jobs on one guest start Limits.guest_min_interval_s apart, a newer submit()
  replaces a request not yet started, and a failure backs the VF off (10 s doubling to 600 s)
  during which submit() refuses with the reason.
- `auto` in the CLI: use this actuator for a VF whose PF is unpatched and whose status() says
  "guest-agent" (the guest answered guest-ping and its interface was found); "none" carries why.
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

__all__ = [
    "AgentChannel", "AgentError", "Coalesce", "ExecResult", "GuestAgentActuator", "GuestVf", "Limits",
    "LibvirtChannel", "RestoreEntry", "Submitted", "Unparsable", "UnixSocketChannel", "VfAgentStatus",
    "guest_exec", "libvirt_connector", "parse_coalesce", "socket_connector",
]
