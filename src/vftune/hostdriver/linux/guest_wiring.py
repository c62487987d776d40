"""Which actuator sets each VF's ITR on a Linux host, and the guest-agent side of LinuxHost.

--guest-agent (RunConfig.guest_agent):
- auto (default): a VF whose ITR the patched PF cannot push (stock ixgbe, or its VF driver never
  fetched the feature) and that a running guest holds goes to the guest-agent actuator; it is
  "guest-agent" once the guest's agent answers and its interface is found by MAC, else "none"
  with the actuator's reason.
- on: every guest-held VF goes to the guest agent, even where the patched PF could push it;
  those that fail are logged as warnings.
- off: the guest agent is never used; VFs the patched PF cannot push are "none", saying so.

The actuator (guest_agent/) does every agent call on its own threads; this module only maps
inventory to attach/detach, requests to submit(), and results back to interrupts/s. The
guest's own setting is journaled (JournalOfGuests, the one write journal) before the first write to a VF and
put back by restore() (stop, start-up after a crash, owner change).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from vftune.config import GUEST_AGENT_MODES
from vftune.hostdriver.linux.guest_agent import (
    Coalesce,
    GuestAgentActuator,
    GuestVf,
    Limits,
    RestoreEntry,
)
from vftune.hostdriver.linux.guest_agent.protocol import AgentChannel
from vftune.itr import itr_to_usecs, usecs_to_itr
from vftune.model import Applied, SettingValue, VfActuator, VfInfo
from vftune.store.journal import Journal, JournalEntry

log = logging.getLogger("vftune.linux.guest_agent")

GuestAgentMode = Literal["auto", "on", "off"]
RX_USECS_ADAPTIVE = 1
RESTORE_DEADLINE_S = 20.0
RESTORE_RETRY_S = 5.0
RESTORE_RETRY_PAUSE_S = 0.5
DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class GuestOriginal:
    """A journal entry: the guest's own coalescing of the VF's interface before vftune wrote it."""

    vf: GuestVf
    ifname: str
    original: Coalesce


# The guest agent's entries in the write journal (store/journal.py). Payload: vf, guest, mac,
# ifname, original ({rx_usecs, adaptive_rx}: Coalesce.as_dict()); restored inside the guest.
KIND_GUEST_AGENT = "guest_agent_coalesce"
GUEST_AGENT_SETTING = "guest_rx_usecs"


class JournalOfGuests:
    """GuestOriginals in the one write journal (in memory or the history file), as KIND_GUEST_AGENT
    entries: remember() has committed when it returns (if it raises JournalError, nothing is
    written); forget() once restored or when the entry can never apply."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def remember(self, entry: GuestOriginal) -> None:
        self.journal.remember(KIND_GUEST_AGENT, entry.vf.pci, GUEST_AGENT_SETTING, {
            "vf": entry.vf.pci, "guest": entry.vf.guest, "mac": entry.vf.mac, "ifname": entry.ifname,
            "original": entry.original.as_dict()})

    def forget(self, vf_pci: str) -> None:
        self.journal.discard(vf_pci, GUEST_AGENT_SETTING)

    def entries(self) -> list[GuestOriginal]:
        """Newest first."""
        found = (guest_original(e) for e in self.journal.pending() if e.kind == KIND_GUEST_AGENT)
        return [g for g in found if isinstance(g, GuestOriginal)]


def guest_original(entry: JournalEntry) -> GuestOriginal | str:
    """A KIND_GUEST_AGENT entry back as the wiring's record, or why it cannot be (a crash or an
    older build may have left anything in the file)."""
    p = entry.payload
    original = Coalesce.from_dict(p.get("original"))
    if not isinstance(original, Coalesce):
        return original.reason
    fields = [p.get(k) for k in ("vf", "guest", "mac", "ifname")]
    if not all(isinstance(v, str) and v for v in fields):
        return f"journal entry {entry.id}: vf, guest, mac and ifname must be non-empty text"
    vf, guest, mac, ifname = (str(v) for v in fields)
    return GuestOriginal(GuestVf(vf, guest, mac), ifname, original)


def rx_usecs_for(itr: int) -> int:
    """The agent's ITR (interrupts/s, 0 = the VF's own adaptive) as the guest's rx-usecs."""
    return RX_USECS_ADAPTIVE if itr <= 0 else itr_to_usecs(itr)


def _itr_of(usecs: SettingValue) -> SettingValue:
    return usecs_to_itr(usecs) if isinstance(usecs, int) else usecs


class GuestAgentWiring:
    def __init__(
        self,
        mode: str,
        connect: Callable[[str], AgentChannel] | None,
        journal: JournalOfGuests,
        *,
        unavailable: str = "",
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """connect None: no transport here (`unavailable` says why); every candidate is "none"."""
        if mode not in GUEST_AGENT_MODES:
            raise ValueError(f"--guest-agent {mode!r}: choose from {', '.join(GUEST_AGENT_MODES)}")
        self.mode = mode
        self.journal = journal
        self._unavailable = unavailable
        self._lock = threading.Lock()
        self._choice: dict[str, VfActuator] = {}  # VFs not on the guest agent: patched or none
        self._attached: dict[str, tuple[GuestVf, int | None]] = {}  # VF -> (as attached, guest pid)
        self._expect: dict[str, int] = {}  # rx-usecs vftune last saw applied, for restore
        self._warned: dict[str, str] = {}
        self.actuator: GuestAgentActuator | None = None
        # Even "off" keeps a (threadless until used) actuator: originals a previous run journaled
        # must still be put back.
        if connect is not None:
            kwargs = {"clock": clock} if clock is not None else {}
            self.actuator = GuestAgentActuator(connect, journal=self._journal_hook, limits=limits, **kwargs)

    def _journal_hook(self, vf: GuestVf, ifname: str, original: Coalesce) -> None:
        self.journal.remember(GuestOriginal(vf, ifname, original))

    # -- inventory -----------------------------------------------------------------------------

    def sync(self, vfs: Sequence[VfInfo], patched_refusal: Callable[[VfInfo], str | None]) -> None:
        """Choose each VF's actuator. patched_refusal(vf) is None when the patched PF can push its
        ITR, else why not. Owner changes drop the old guest's journal entry (its VF left it)."""
        act = self.actuator
        seen: set[str] = set()
        for vf in vfs:
            seen.add(vf.pci)
            refusal = patched_refusal(vf)
            wanted = vf.guest is not None and self.mode != "off" and (refusal is not None or self.mode == "on")
            if not wanted or act is None or vf.guest is None or not vf.mac:  # "off": wanted is False
                self._release(vf.pci, owner_gone=vf.guest is None)
                self._choice[vf.pci] = self._static_choice(vf, refusal, wanted)
                continue
            gvf = GuestVf(vf.pci, vf.guest.name, vf.mac)
            old = self._attached.get(vf.pci)
            if old is not None and old[0] != gvf:
                self._release(vf.pci, owner_gone=True)  # new owner or MAC: the old entry cannot apply
                old = None
            if old is None or old[1] != vf.guest.pid:  # new, or the guest restarted: check again
                act.attach(gvf)
                self._attached[vf.pci] = (gvf, vf.guest.pid)
            self._choice.pop(vf.pci, None)
        for pci in set(self._attached) - seen:
            self._release(pci, owner_gone=True)
        for pci in set(self._choice) - seen:
            del self._choice[pci]

    def _release(self, pci: str, *, owner_gone: bool) -> None:
        gone = self._attached.pop(pci, None)
        if gone is None or self.actuator is None:
            return
        if owner_gone:
            log.info("%s: left guest %s: its guest-agent journal entry is dropped", pci, gone[0].guest)
            self.journal.forget(pci)
            self._expect.pop(pci, None)
        self.actuator.detach(pci)

    def _static_choice(self, vf: VfInfo, refusal: str | None, wanted: bool) -> VfActuator:
        if refusal is None and not wanted:
            return VfActuator("patched", f"patched ixgbe: the PF's sriov/{vf.index}/itr_usecs")
        refusal = refusal or "--guest-agent on prefers the guest agent"
        if vf.guest is None:
            where = "bound to ixgbevf on the host" if vf.driver == "ixgbevf" else "no running guest holds it"
            return VfActuator("none", f"{refusal}; {where}, so there is no guest agent to ask")
        if self.mode == "off":
            return VfActuator("none", f"{refusal}; the guest agent is off (--guest-agent off)")
        if self.actuator is None:
            return VfActuator("none", f"{refusal}; no guest-agent transport: {self._unavailable}")
        return VfActuator("none", f"{refusal}; the PF reports no MAC for it yet, so its interface in "
                          f"guest {vf.guest.name} cannot be found")

    # -- the tick --------------------------------------------------------------------------------

    def handles(self, pci: str) -> bool:
        return pci in self._attached

    def status(self, pci: str) -> VfActuator | None:
        if pci in self._attached and self.actuator is not None:
            st = self.actuator.status(pci)
            if st is not None:
                found = VfActuator(st.actuator, st.reason)
                if self.mode == "on" and st.actuator == "none" and self._warned.get(pci) != st.reason:
                    self._warned[pci] = st.reason  # once per new reason, not every status read
                    log.warning("%s: --guest-agent on, but: %s", pci, st.reason)
                return found
        return self._choice.get(pci)

    def submit(self, pci: str, itr: int) -> Applied:
        assert self.actuator is not None
        usecs = rx_usecs_for(itr)
        sub = self.actuator.submit(pci, usecs)
        if not sub.accepted:
            return Applied(pci, "itr", itr, None, None, ok=False, error=sub.reason)
        if sub.reason.endswith(f"already rx-usecs {usecs}"):  # read back recently: nothing to send
            return Applied(pci, "itr", itr, _itr_of(usecs), _itr_of(usecs))
        return Applied(pci, "itr", itr, None, None, pending=True)

    def collect(self) -> list[Applied]:
        """Finished guest writes as "itr" outcomes in interrupts/s (rx-usecs 1, adaptive, is 0)."""
        if self.actuator is None:
            return []
        out = []
        for a in self.actuator.collect():
            if a.ok and isinstance(a.applied, int):
                self._expect[a.target] = a.applied
            elif self.mode == "on":
                log.warning("%s: --guest-agent on, write failed: %s", a.target, a.error)
            out.append(Applied(a.target, "itr", _itr_of(a.requested), _itr_of(a.old), _itr_of(a.applied),
                               a.ok, a.error))
        return out

    # -- restore ------------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Whether VFs may be tuned through the guest agent here (a transport and not "off")."""
        return self.actuator is not None and self.mode != "off"

    def restore_entries(self, entries: Sequence[GuestOriginal], deadline_s: float = RESTORE_DEADLINE_S
                        ) -> list[Applied]:
        """Put these originals back (blocking, all guests in parallel), one Applied each; the
        caller's journal forgets those that worked."""
        if not entries:
            return []
        if self.actuator is None:
            return [Applied(e.vf.pci, "rx_usecs", e.original.effective_rx_usecs, None, None, ok=False,
                            error=f"{e.vf.pci}: guest {e.vf.guest}: no guest-agent transport to restore "
                            f"{e.original.describe()}: {self._unavailable}; entry kept")
                    for e in entries]
        # An agent whose previous client died (vftune killed mid-call) may refuse connections for
        # a moment before it listens again: failed entries are tried again for RESTORE_RETRY_S.
        end = time.monotonic() + deadline_s
        retry_until = time.monotonic() + min(RESTORE_RETRY_S, deadline_s)
        results: list[Applied | None] = [None] * len(entries)
        todo = list(range(len(entries)))
        while todo:
            done = self.actuator.restore([RestoreEntry(entries[i].vf, entries[i].original,
                                                       self._expect.get(entries[i].vf.pci)) for i in todo],
                                         max(0.1, end - time.monotonic()))
            for i, r in zip(todo, done, strict=True):
                results[i] = r
            todo = [i for i in todo if not results[i].ok]  # type: ignore[union-attr]
            if not todo or time.monotonic() + RESTORE_RETRY_PAUSE_S >= min(retry_until, end):
                break
            time.sleep(RESTORE_RETRY_PAUSE_S)  # pacing a retry, not waiting for a result
        out = [r for r in results if r is not None]
        for e, r in zip(entries, out, strict=True):
            if r.ok:
                self._expect.pop(e.vf.pci, None)
        return out

    def restore(self, deadline_s: float = RESTORE_DEADLINE_S) -> list[Applied]:
        """restore_entries() for everything the journal holds; those put back are forgotten."""
        entries = self.journal.entries()
        results = self.restore_entries(entries, deadline_s)
        for e, r in zip(entries, results, strict=True):
            if r.ok:
                self.journal.forget(e.vf.pci)
        return results

    def close(self) -> None:
        if self.actuator is not None:
            self.actuator.close()
