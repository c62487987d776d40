"""The agent: one snapshot per tick -> policies -> actuators -> store.

Every write goes through the host driver, which reads it back; the agent
records what it asked, what was there before and what the host now shows, and
on stop asks the driver to restore everything it changed.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from vftune.agent.backoff import WriteBackoff
from vftune.agent.costmodel import cliff_inputs
from vftune.agent.costs import CostTracker
from vftune.agent.pollmode import CAUSE as POLL_MODE_CAUSE
from vftune.agent.pollmode import REASON as POLL_MODE_REASON
from vftune.agent.pollmode import PollModeWatch
from vftune.agent.recording import SampleRecorder
from vftune.agent.sampling import RateDeriver
from vftune.agent.value import MeasuresWindows, ValueMeter, summarize
from vftune.control.hybrid import cliff_rate
from vftune.control.memory import HostProfiles, ProfilesRecord
from vftune.control.objective import Goal
from vftune.control.policy import (
    DEFAULT_GOAL,
    Excluded,
    FixedItr,
    GoalPolicyFactory,
    PfController,
    PfControllerFactory,
    VfPolicy,
    VfPolicyFactory,
)
from vftune.hostdriver.base import HostDriver, HostError
from vftune.itr import same_itr, usecs_to_itr
from vftune.model import (
    TICK_BUCKETS,
    AgentView,
    Applied,
    Decision,
    Guest,
    Inventory,
    ItrDecision,
    ModeDecision,
    PfInfo,
    PfSample,
    PfView,
    SettingValue,
    TickTimes,
    VfActuator,
    VfDrops,
    VfInfo,
    VfSample,
    VfView,
    VsAdaptive,
    decision_cause,
)
from vftune.rules import EMPTY, NO_RULE, ConfigError, ConfigFile, Rule, VfRule, VfTarget, parse_api_rules
from vftune.store.db import Store

log = logging.getLogger("vftune.agent")


MAX_FAILED_TICKS = 30


@dataclass
class AgentConfig:
    # Seconds of host time between ticks: the PF's ethtool statistics may be read this often
    # (GSTATS_MIN_INTERVAL_S), so a probe's 0.5-s window starts one tick after the VF took it.
    interval: float = 0.25
    maintain_every_s: float = 5.0  # between retention passes (each a few small batches)
    fit_every_s: float = 30.0  # between cost-model fits
    inventory_every_s: float = 30.0  # between inventory re-reads (events trigger one sooner)
    # History: one row per VF and PF each this many seconds, merged from the ticks' samples
    # (agent/recording.py); decisions are recorded as they happen. 0: every tick's.
    record_every_s: float = 1.0
    # Operators' rules: the longest interval (rx-usecs) a VF's own adaptive ITR may choose, by
    # VF PCI address or "*" for every VF; applied as a lower ITR bound when the VF is found or
    # changes owner. The one place such rules enter the agent (RunConfig.max_interval_us today,
    # the config file's per-VF rules once they land).
    max_interval_us: Mapping[str, int] = field(default_factory=dict)
    # A patched VF fetches its host-set ITR every 250 ms for 10 s after any host write, else
    # every 2 s (vfdriver-patches 0014/0015). For keep_warm_s after each change the agent writes
    # the rate in force again every keep_warm_every_s, so that the next change (a remembered
    # setting recalled when the load flips back) is in force within 250 ms instead of up to 2 s.
    # Cost: <= 4 mailbox fetches/s per such VF, against 0.5; 0 turns it off.
    keep_warm_s: float = 60.0
    keep_warm_every_s: float = 8.0


@dataclass
class VfState:
    """What the API shows for one VF: the latest sample and what the agent set."""

    sample: VfSample | None = None
    itr: int = 0  # what the agent set (read back); 0 = the VF's own adaptive ITR
    # A write the host accepted that is not in force yet (the patched VF fetches within 2 s, the
    # guest agent runs ethtool later): itr keeps the rate in force until it is confirmed.
    pending_itr: int | None = None
    policy: str = ""
    policy_state: dict[str, Any] = field(default_factory=dict)
    last_decision: str | None = None
    rule: VfRule = NO_RULE  # what the config file's rules say about this VF
    totals: dict[str, float] = field(default_factory=dict)  # model.VF_TOTALS since start
    poll_mode: bool = False  # a poll-mode driver runs it in the guest (pollmode.py): left alone
    value: ValueMeter = field(default_factory=ValueMeter)  # its set rates against its adaptive ITR


@dataclass
class PfState:
    sample: PfSample | None = None
    mode: str = "napi"
    napi_budget: int | None = None
    controller: str = ""
    controller_state: dict[str, Any] = field(default_factory=dict)
    last_decision: str | None = None


def _owner(guest: Guest | None) -> str | None:
    return None if guest is None else guest.uuid or guest.name


def _add_totals(totals: dict[str, float], s: VfSample) -> None:
    """Counters since start from one sample's rates (model.VF_TOTALS), the keys in that order."""
    dt, get = s.dt, totals.get
    ints = s.interrupts_per_s
    if (not (s.rx_bps or s.tx_bps or s.rx_pps or s.tx_pps or ints) and "rx_bytes" in totals
            and (ints is None or "interrupts" in totals) and math.isfinite(dt)):
        # An idle VF: every term is 0.0 (+-), and a total plus zero is the total (none is -0.0:
        # each starts at 0.0 + a product of rates >= 0): nothing changes.
        return
    totals["rx_bytes"] = get("rx_bytes", 0.0) + s.rx_bps / 8 * dt
    totals["tx_bytes"] = get("tx_bytes", 0.0) + s.tx_bps / 8 * dt
    totals["rx_packets"] = get("rx_packets", 0.0) + s.rx_pps * dt
    totals["tx_packets"] = get("tx_packets", 0.0) + s.tx_pps * dt
    if ints is not None:
        totals["interrupts"] = get("interrupts", 0.0) + ints * dt


def _switches(s: PfSample | None, st: PfState | None) -> int | None:
    """DE/NAPI switches: the driver's count when it switches itself, else the agent's controller's."""
    if s is not None and s.switches is not None:
        return s.switches
    counted = st.controller_state.get("switches") if st else None
    return counted if isinstance(counted, int) else None


def _drops_view(host: VfDrops, rate: float | None) -> VfDrops:
    """What the host says of a VF's guest socket drops, made to agree with the sample: the rate is
    known exactly when the source is "guest-agent" (the host answers now; the rate is of the last tick)."""
    if rate is not None:
        return host if host.source == "guest-agent" else VfDrops("guest-agent", f"rate from its last reads; since: {host.reason}")
    if host.source == "guest-agent":
        return VfDrops("pending", f"{host.reason}; a rate needs two reads")
    return host


def _vf_state(st: VfState | None) -> str:
    """The VF's phase in one word (model.VF_STATES)."""
    if st is None:
        return "adaptive"
    if st.rule.state is not None:
        return st.rule.state
    if st.poll_mode:
        return "excluded"
    if st.policy.startswith("fixed"):
        return "pinned"
    phase = st.policy_state.get("phase")
    if phase == "probing":
        return "searching"
    if phase == "holding" or st.itr != 0:
        return "converged"
    return "adaptive"


class Agent:
    def __init__(
        self,
        host: HostDriver,
        store: Store | None,
        vf_policy: VfPolicyFactory,
        pf_controller: PfControllerFactory,
        config: AgentConfig | None = None,
        wall_offset: float | None = None,
        rules: ConfigFile | None = None,
    ) -> None:
        self.host = host
        self.store = store
        self.config = config or AgentConfig()
        self.caps = host.capabilities()
        self._vf_policy_factory = vf_policy
        self._pf_controller_factory = pf_controller
        self._deriver = RateDeriver()
        self._poll_mode = PollModeWatch()
        self._policies: dict[str, VfPolicy] = {}
        self._controllers: dict[str, PfController] = {}
        self.vfs: dict[str, VfState] = {}
        self.pfs: dict[str, PfState] = {}
        self.inventory = Inventory(pfs=())
        self.ticks = 0
        self.last_tick_wall: float | None = None
        self.started_wall = time.time()
        self.detail = ""  # what the agent runs on, as start() was told
        # Host clock -> Unix time, so records from a simulated clock land on a real timeline.
        self._wall_offset = wall_offset if wall_offset is not None else time.time() - host.now()
        self.lock = threading.Lock()  # guards vfs/pfs/inventory for API readers
        self._run_id: int | None = None
        self.costs = CostTracker()
        self._recorder = SampleRecorder(self.config.record_every_s)
        self.costs.tick_s = self.config.interval
        self._measuring: dict[type, bool] = {}  # VF policy class -> whether it MeasuresWindows
        self._refresh_reason: str | None = None
        self._last_refresh_reason: str | None = None  # the last one logged at INFO
        self._guest_of: dict[str, str] = {}
        self.rules = rules or EMPTY  # the config file's [[rule]]s; set_rules() swaps them
        # Keeps the API's rules across restarts (`vftune run` writes them to the state directory).
        self.api_rules_saver: Callable[[tuple[Rule, ...]], None] = lambda rules: None
        self._decision_counts: dict[tuple[str, str], int] = {}
        self._tick_counts = [0] * (len(TICK_BUCKETS) + 1)
        self._tick_sum = 0.0
        self.backoff = WriteBackoff()
        self._warm: dict[str, tuple[float, float]] = {}  # VF -> (last write, keep warm until), host time
        self.keep_warm_writes = 0
        self.heartbeat: Callable[[], None] = lambda: None  # called after every good tick (watchdog)
        # Whether a view will be taken after this tick (the API process's push says; an
        # in-process reader may take one any time): the policies' states are copied only then.
        self.view_wanted: Callable[[], bool] = lambda: True
        # VFs at rest (sampling.py): no traffic, no interrupts, their policy at rest, nothing
        # on its way. Each leaves it when its counts move, a write is made to it, or it gets a
        # new policy (a rule or its owner changed).
        self._resting: set[str] = set()
        # Only a flag is set on the notifying thread; the tick does the re-read.
        host.add_inventory_listener(lambda: self.request_refresh("host reported a guest or VF change"))

    def wall(self, host_time: float) -> float:
        return host_time + self._wall_offset

    def wall_now(self) -> float:
        """The host's clock now, as Unix seconds."""
        return self.wall(self.host.now())

    # -- what readers see ---------------------------------------------------------

    def view(self) -> AgentView:
        """A frozen copy of everything the API and metrics show, taken under the lock at once."""
        with self.lock:
            pfs = tuple(self._pf_view(pf, self.pfs.get(pf.name)) for pf in self.inventory.pfs)
            vfs = tuple(self._vf_view(vf, self.vfs.get(vf.pci)) for vf in self.inventory.vfs())
            return AgentView(
                vs_adaptive=summarize(vfs),
                backend=self.host.name, detail=self.detail, started=self.started_wall,
                interval_s=self.config.interval, ticks=self.ticks, last_tick_wall=self.last_tick_wall,
                capabilities=self.caps, pfs=pfs, vfs=vfs, ignored=self.inventory.ignored,
                cost_model=self.costs.report(), decisions=dict(self._decision_counts),
                tick_times=TickTimes(tuple(self._tick_counts), self._tick_sum, sum(self._tick_counts)),
            )

    def _vf_view(self, vf: VfInfo, st: VfState | None) -> VfView:
        s = st.sample if st else None
        phase = st.policy_state.get("phase") if st else None
        act = self.host.vf_actuator(vf.pci) or VfActuator("none", f"the {self.host.name} backend does not say")
        rx_dropped = s.rx_dropped_pps if s else None
        drops = _drops_view(self.host.vf_drops(vf.pci) or VfDrops(
            "off", f"the {self.host.name} backend does not read guests' socket drops"), rx_dropped)
        return VfView(
            pci=vf.pci, pf=vf.pf, index=vf.index, driver=vf.driver,
            guest=vf.guest.name if vf.guest else None, guest_uuid=vf.guest.uuid if vf.guest else None,
            itr=st.itr if st else 0, policy=st.policy if st else "", phase=str(phase) if phase else None,
            rx_pps=s.rx_pps if s else None, rx_bps=s.rx_bps if s else None,
            tx_pps=s.tx_pps if s else None, tx_bps=s.tx_bps if s else None,
            interrupts_per_s=s.interrupts_per_s if s else None, guest_cpu=s.guest_cpu if s else None,
            guest_irq_cpu=s.guest_irq_cpu if s else None, guest_user_cpu=s.guest_user_cpu if s else None,
            fresh=s.fresh if s else None, updated=self.wall(s.t) if s else None,
            last_decision=st.last_decision if st else None,
            policy_state=dict(st.policy_state) if st else {},
            state=_vf_state(st), objective=st.rule.objective if st else NO_RULE.objective,
            margin=st.rule.margin if st else None,
            rule=st.rule.source if st else None, totals=dict(st.totals) if st else {},
            actuator=act.actuator, actuator_reason=act.reason, rx_dropped_pps=rx_dropped,
            rx_dropped_source=drops.source, rx_dropped_reason=drops.reason,
            itr_pending=st.pending_itr if st else None,
            vs_adaptive=self._vs_adaptive(st, s),
        )

    def _vs_adaptive(self, st: VfState | None, s: VfSample | None) -> VsAdaptive | None:
        """A VF holding a set rate (not searching, nothing on its way) against its adaptive ITR."""
        if st is None or s is None or st.itr == 0 or st.pending_itr is not None or _vf_state(st) == "searching":
            return None
        return st.value.compare(st.itr, s.t)

    @staticmethod
    def _pf_view(pf: PfInfo, st: PfState | None) -> PfView:
        s = st.sample if st else None
        return PfView(
            name=pf.name, pci=pf.pci, device_id=pf.device_id, driver=pf.driver, num_vfs=pf.num_vfs,
            total_vfs=pf.total_vfs, mode=st.mode if st else "napi", napi_budget=st.napi_budget if st else None,
            controller=st.controller if st else "", controller_state=dict(st.controller_state) if st else {},
            rx_pps=s.rx_pps if s else None, rx_bps=s.rx_bps if s else None,
            last_decision=st.last_decision if st else None,
            mode_now=s.mode if s else None, switches=_switches(s, st),
        )

    # -- workload memory ------------------------------------------------------

    def _profiles(self) -> HostProfiles | None:
        memory = getattr(self._vf_policy_factory, "profiles", None)
        return memory if isinstance(memory, HostProfiles) else None

    def export_profiles(self) -> dict[str, Any] | None:
        """The VF policy's workload memory as plain data; None when the policy keeps none."""
        memory = self._profiles()
        return None if memory is None else memory.export()

    def import_profiles(self, data: object) -> int:
        """Merge a memory record (ProfilesRecord's JSON form) into the host's; returns how many
        entries it brought. ValueError names the first bad field; LookupError: no memory here."""
        memory = self._profiles()
        if memory is None:
            raise LookupError("the VF policy keeps no workload memory (run with --policy search)")
        return memory.load(ProfilesRecord.from_json(data))

    # -- inventory ----------------------------------------------------------

    def set_rules(self, rules: ConfigFile) -> None:
        """New file rules (a SIGHUP reload): applied on the next tick's inventory refresh; the
        API's rules stay."""
        self.rules = replace(rules, api_rules=self.rules.api_rules)
        self.request_refresh(f"config reloaded from {rules.path}")

    def list_rules(self) -> list[dict[str, Any]]:
        """Every rule in match order, with its source (GET /v1/rules)."""
        return self.rules.listed()

    def put_api_rules(self, body: object) -> list[dict[str, Any]]:
        """Replace the API's rules (PUT /v1/rules): checked as a file's are (ValueError lists
        every problem), kept by `api_rules_saver`, applied at the next tick."""
        try:
            new = parse_api_rules(body)
        except ConfigError as exc:
            raise ValueError("\n".join(str(p) for p in exc.problems)) from None  # one problem a line
        self.api_rules_saver(new)
        self.rules = replace(self.rules, api_rules=new)
        self.request_refresh(f"{len(new)} rule(s) set over the API")
        return self.list_rules()

    def _rule_for(self, pf: PfInfo, vf: VfInfo) -> VfRule:
        return self.rules.rule_for(VfTarget(vf=vf.pci, pf=pf.name, pf_pci=pf.pci,
                                            guest=vf.guest.name if vf.guest else None,
                                            guest_uuid=vf.guest.uuid if vf.guest else None))

    def _new_policy(self, pci: str, rule: VfRule) -> VfPolicy:
        """The VF's policy: the rule's pin or exclusion, else the configured policy for its goal."""
        if rule.exclude:
            return Excluded()
        if rule.pin_itr is not None:
            return FixedItr(rule.pin_itr)
        goal = Goal.of(rule.objective, rule.max_interval_us, rule.margin)
        if goal == DEFAULT_GOAL:
            return self._vf_policy_factory(pci, self.caps)
        # A goal other than the default comes from a config rule; `vftune run` builds its
        # factories with vftune.agent.policies, which take one.
        return cast(GoalPolicyFactory, self._vf_policy_factory)(pci, self.caps, goal)

    def request_refresh(self, reason: str) -> None:
        """Ask for an inventory refresh on the next tick (a libvirt hook or event said so)."""
        self._refresh_reason = reason

    def refresh_inventory(self) -> list[Decision]:
        """Re-read PFs, VFs and owners. A VF whose guest changed gets a fresh policy, and if the
        agent had set its ITR, it is handed back to its adaptive ITR so the next guest starts stock."""
        inv = self.host.inventory()
        t = self.wall(self.host.now())
        handed_back: list[str] = []
        excluded_back: list[str] = []
        pinned: list[tuple[str, int]] = []
        fresh: list[str] = []
        with self.lock:
            before = {vf.pci: vf.guest for vf in self.inventory.vfs()}
            self.inventory = inv
            self._guest_of = {vf.pci: vf.guest.name for vf in inv.vfs() if vf.guest is not None}
            for pf_info in inv.pfs:
                for vf in pf_info.vfs:
                    rule = self._rule_for(pf_info, vf)
                    changed = vf.pci in before and _owner(before[vf.pci]) != _owner(vf.guest)
                    ruled = vf.pci in self.vfs and self.vfs[vf.pci].rule != rule
                    if vf.pci not in self._policies or changed or ruled:
                        itr = self.vfs[vf.pci].itr if vf.pci in self.vfs else 0
                        if rule.exclude and itr != 0:
                            excluded_back.append(vf.pci)  # undo the agent's own write, then hands off
                        elif changed and itr != 0 and rule.pin_itr is None:
                            handed_back.append(vf.pci)
                        policy = self._new_policy(vf.pci, rule)
                        self._policies[vf.pci] = policy
                        self._resting.discard(vf.pci)  # the new policy sees samples before it rests
                        if rule.pin_itr is None:  # a pin is set below, with its rule as the reason
                            fresh.append(vf.pci)
                        self.vfs[vf.pci] = VfState(policy=policy.name, itr=itr, rule=rule)
                    if rule.pin_itr is not None and not same_itr(self.vfs[vf.pci].itr, rule.pin_itr):
                        pinned.append((vf.pci, rule.pin_itr))
            for pf in inv.pfs:
                if pf.name not in self._controllers:
                    ctl = self._pf_controller_factory(pf.name, self.caps)
                    self._controllers[pf.name] = ctl
                    self.pfs[pf.name] = PfState(controller=ctl.name)
            # VFs that went away (VFs disabled) stop being tuned.
            for pci in set(self._policies) - {vf.pci for vf in inv.vfs()}:
                del self._policies[pci]
                del self.vfs[pci]
                self._resting.discard(pci)
        decisions = []
        for pci in handed_back:
            owner = _owner(before[pci]) or "no guest"
            handed = self._apply_itr(pci, ItrDecision(0, f"owner changed (was {owner}): back to adaptive"), t)
            if handed is not None:
                decisions.append(handed)
        for pci in excluded_back:
            reason = f"excluded by {self.vfs[pci].rule.source}: back to adaptive, then left alone"
            back = self._apply_itr(pci, ItrDecision(0, reason), t)
            if back is not None:
                decisions.append(back)
        # A pin takes effect at once, not on the next sample.
        for pci, itr in pinned:
            pin = self._apply_itr(pci, ItrDecision(itr, f"pinned by {self.vfs[pci].rule.source}: {itr}/s"), t)
            if pin is not None:
                decisions.append(pin)
        # A fixed or pinned ITR needs no counters: set it now, so it holds (and is journaled) from
        # the first tick even on a VF whose counters cannot be read.
        for pci in fresh:
            first = self._policies[pci].initial()
            if first is not None and pci not in handed_back:  # a handed-back VF gets it at its next sample
                initial = self._apply_itr(pci, first, t)
                if initial is not None:
                    decisions.append(initial)
        for vf in inv.vfs():
            if vf.pci not in before or _owner(before[vf.pci]) != _owner(vf.guest):
                decisions.extend(self._apply_bounds(vf.pci, t))
        if self.store is not None:
            self.store.record_inventory(inv, t)
        return decisions

    # -- one tick -----------------------------------------------------------

    def tick(self) -> None:
        started = time.monotonic()
        decisions: list[Decision] = []
        if self._refresh_reason is not None or (self.ticks and self._due(self.config.inventory_every_s)):
            reason, self._refresh_reason = self._refresh_reason, None
            if reason:
                # A state that repeats (a host whose listener fires every tick) is said once,
                # and again when the reason changes.
                log.log(logging.DEBUG if reason == self._last_refresh_reason else logging.INFO,
                        "inventory refresh: %s", reason)
                self._last_refresh_reason = reason
            decisions.extend(self.refresh_inventory())
        snap = self.host.snapshot()
        decisions.extend(self._collect(self.wall(snap.time)))
        for err in snap.errors:
            log.warning("snapshot: %s", err)
        itrs = {pci: st.itr for pci, st in self.vfs.items()}
        modes = {name: st.mode for name, st in self.pfs.items()}
        pending = {pci: st.pending_itr for pci, st in self.vfs.items() if st.pending_itr is not None}
        resting, warm = self._resting, self._warm
        # VFs at rest are rated when a history row closes (with no store: as often).
        last = self._deriver.last
        if self.store is None:
            close = self._due(self.config.record_every_s)
        else:
            close = last is not None and self._recorder.closes(snap.time, last.time)
        vf_samples, pf_samples, quiet = self._deriver.derive(snap, self.inventory, itrs, modes, pending, resting,
                                                             close)
        now = self.wall(snap.time)
        self._poll_mode.update(snap)
        confirmed = self._poll_mode.confirmed
        vfs_get, policies = self.vfs.get, self._policies  # the same dicts all tick (entries change)
        # A policy is given every interval of its VF, a quiet span (before the VF's tick sample,
        # if it has one) as one sample: its windows never span time it was not told about.
        samples = quiet + vf_samples if quiet else vf_samples
        arrived: set[str] = set()  # VFs that came to rest this tick
        for s in samples:
            pci = s.pci
            # _poll_mode_step does nothing for a VF neither in nor coming out of poll mode.
            st = vfs_get(pci)
            if st is not None and (st.poll_mode or pci in confirmed) and self._poll_mode_step(pci, now, decisions):
                resting.discard(pci)
                continue
            policy = policies[pci]
            decision = policy.step(s)
            if decision is not None:
                applied_itr = self._apply_itr(pci, decision, now)
                if applied_itr is not None:
                    decisions.append(applied_itr)
            elif (not (s.interrupts or s.rx_pps or s.tx_pps or s.rx_bps or s.tx_bps) and s.itr_pending is None
                  and pci not in warm and policy.at_rest()):
                if pci not in resting:
                    resting.add(pci)
                    arrived.add(pci)
            else:
                resting.discard(pci)
        self._keep_warm(now)
        for p in pf_samples:
            ctl = self._controllers.get(p.pf)
            if ctl is None:
                continue
            mode_decision = ctl.step(p)
            if mode_decision is not None:
                decisions.extend(self._apply_mode(p.pf, mode_decision, now))
        # The policies' states are for readers only (the view): copied when one will be built.
        states = self.view_wanted()
        vfs, measuring = self.vfs, self._measuring
        with self.lock:
            for s in samples:
                pci = s.pci
                st = vfs.get(pci)
                if st is not None:
                    st.sample = s
                    policy = policies[pci]
                    # A VF coming to rest keeps its policy's state as it is now: its quiet spans
                    # change nothing in it.
                    if (states or pci in arrived) and not st.poll_mode:
                        st.policy_state = policy.state()
                    measures = measuring.get(type(policy))
                    if measures is None:
                        measures = self._measures_windows(policy)
                    if measures:
                        st.value.add(policy.measured_window())  # type: ignore[attr-defined]
                    _add_totals(st.totals, s)
            for p in pf_samples:
                if p.pf in self.pfs:
                    self.pfs[p.pf].sample = p
                    self.pfs[p.pf].controller_state = self._controllers[p.pf].state()
            self.ticks += 1
            self.last_tick_wall = time.time()
            self._count_decisions(decisions)
            took = time.monotonic() - started
            self._tick_counts[bisect.bisect_left(TICK_BUCKETS, took)] += 1
            self._tick_sum += took
        self.costs.add(vf_samples, self._guest_of, quiet)
        if self._due(self.config.fit_every_s):
            self._refit_costs(pf_samples, now)
        if self.store is not None:
            self._recorder.add(snap.time, vf_samples, pf_samples, quiet)
            if self._recorder.due(snap.time):
                self.store.record_tick(now, *self._recorder.take(), decisions)
            else:
                self.store.record_decisions(decisions)
            if self._due(self.config.maintain_every_s):
                self.store.maintain(now)

    def _measures_windows(self, policy: VfPolicy) -> bool:
        """isinstance() against a runtime-checkable Protocol walks its members every call (3 ms
        a tick at 126 VFs, measured): once per policy class instead."""
        kind = type(policy)
        known = self._measuring.get(kind)
        if known is None:
            known = self._measuring[kind] = isinstance(policy, MeasuresWindows)
        return known

    def _poll_mode_step(self, pci: str, now: float, decisions: list[Decision]) -> bool:
        """True while the VF runs a poll-mode driver: its own rate is handed back once, and its
        policy starts afresh when interrupts return."""
        st = self.vfs.get(pci)
        if st is None:
            return False
        poll = pci in self._poll_mode.confirmed and st.rule.state is None
        if poll and not st.poll_mode:
            log.info("%s: %s", pci, POLL_MODE_REASON)
            if st.itr != 0:
                handed = self._apply_itr(pci, ItrDecision(0, POLL_MODE_REASON, POLL_MODE_CAUSE), now)
                if handed is not None:
                    decisions.append(handed)
        elif st.poll_mode and not poll:
            self._policies[pci] = self._new_policy(pci, st.rule)
        st.poll_mode = poll
        if poll:
            st.policy_state = {"phase": "poll-mode", "reason": POLL_MODE_REASON}
        return poll

    def _due(self, every_s: float) -> bool:
        """Whether this tick is one of every `every_s` seconds' worth (counted in ticks, so a
        simulated run does the same work at any speed)."""
        return self.ticks % max(1, round(every_s / self.config.interval)) == 0

    def _count_decisions(self, decisions: list[Decision]) -> None:
        for d in decisions:
            # The policy's own cause (a bounded enum) where it gives one, else the reason's first word.
            key = (d.setting, d.cause or decision_cause(d.reason))
            self._decision_counts[key] = self._decision_counts.get(key, 0) + 1

    def _refit_costs(self, pf_samples: list[PfSample], t: float) -> None:
        fit = self.costs.refit()
        if fit is None:
            return
        if self.store is not None:
            self.store.record_cost_fit(t, fit.alpha, fit.beta, fit.gamma, fit.rows)
        # A PF controller with no configured cliff takes it from the host's measured costs.
        for p in pf_samples:
            ctl = self._controllers.get(p.pf)
            if ctl is None or not ctl.takes_measured_cliff():
                continue
            packet_bytes = p.rx_bps / 8 / p.rx_pps if p.rx_pps > 0 else 1500.0
            try:
                r, mu = cliff_inputs(fit, packet_bytes)
            except ValueError as exc:
                log.info("%s: no cliff from the cost model: %s", p.pf, exc)
                continue
            ctl.set_cliff(cliff_rate(r, mu), "cost model")

    def _supports_itr(self, pci: str) -> bool:
        if not self.caps.vf_itr:
            return False
        vf = self.inventory.vf(pci) if self.caps.vf_itr_unsupported_pfs else None
        return vf is None or vf.pf not in self.caps.vf_itr_unsupported_pfs

    def _apply_itr(self, pci: str, decision: ItrDecision, t: float) -> Decision | None:
        if not self._supports_itr(pci) or not self.backoff.may_try(pci, "itr", t):
            return None  # unsupported here, or failing and not due for a retry
        applied = self._call(lambda: self.host.set_vf_itr(pci, decision.itr), pci, "itr", decision.itr)
        self._resting.discard(pci)
        st = self.vfs[pci]
        if applied.ok and self.config.keep_warm_s > 0:
            self._warm[pci] = (t, t + self.config.keep_warm_s)
        if applied.ok and applied.pending:
            st.pending_itr = decision.itr
        elif applied.ok:
            st.itr, st.pending_itr = int(applied.applied or 0), None
        st.last_decision = decision.reason + (" (queued)" if applied.pending else "")
        if not self._report(applied, decision.reason, t):
            return None
        return Decision(t, pci, "itr", applied.old, decision.itr, applied.applied, applied.ok,
                        decision.reason, applied.error, decision.cause)

    def _keep_warm(self, t: float) -> None:
        """Write the rate in force again to a patched VF changed lately (AgentConfig.keep_warm_s).
        Not a decision: nothing changes, and a failure only ends the warm spell."""
        for pci, (last, until) in list(self._warm.items()):
            st = self.vfs.get(pci)
            if st is None or t >= until:
                del self._warm[pci]
                continue
            if t - last < self.config.keep_warm_every_s - 1e-9 or st.pending_itr is not None:
                continue  # a write on its way keeps the VF fetching fast by itself
            act = self.host.vf_actuator(pci)
            if act is None or act.actuator != "patched" or not self._supports_itr(pci):
                del self._warm[pci]
                continue
            itr = st.itr
            applied = self._call(functools.partial(self.host.set_vf_itr, pci, itr), pci, "itr", itr)
            if not applied.ok or applied.pending:
                # Failed, or the VF no longer runs it (then the write is on its way like any other).
                log.debug("%s: keeping the ITR fetch fast: %s", pci, applied.error or "the VF runs another rate")
                if applied.ok:
                    st.pending_itr = itr
                del self._warm[pci]
                continue
            self._warm[pci] = (t, until)
            with self.lock:
                self.keep_warm_writes += 1
                key = ("itr", "keep_warm")  # in vftune_decisions_total beside the real decisions
                self._decision_counts[key] = self._decision_counts.get(key, 0) + 1

    def _apply_bounds(self, pci: str, t: float) -> list[Decision]:
        """An operator's max_interval_us for this VF, as a lower bound on its adaptive ITR."""
        rules = self.config.max_interval_us
        usecs = rules.get(pci, rules.get("*"))
        if usecs is None:
            return []
        min_itr = usecs_to_itr(usecs)
        reason = f"rule: max_interval_us {usecs}"
        applied = self._call(lambda: self.host.set_vf_itr_bounds(pci, min_itr, 0), pci, "itr_bounds", f"{min_itr}..0")
        self._log_applied(applied, reason)
        return [Decision(t, pci, "itr_bounds", applied.old, applied.requested, applied.applied, applied.ok,
                         reason, applied.error)]

    def _collect(self, t: float) -> list[Decision]:
        """Writes the host finished since the last tick (the guest agent's, read back in the guest)."""
        decisions = []
        for a in self.host.collect_applied():
            st = self.vfs.get(a.target)
            reason = ("the VF's own report of what it runs" if a.setting == "itr_confirmed"
                      else "read back after an asynchronous write (guest agent)")
            if a.setting in ("itr", "itr_confirmed") and st is not None:
                with self.lock:
                    if a.ok:
                        st.itr = int(a.applied or 0)
                    st.pending_itr = None  # in force, or failed: nothing is on its way either way
                    st.last_decision = f"{st.last_decision or ''}: {'applied' if a.ok else 'failed'}".lstrip(": ")
            if a.setting == "itr_confirmed" and a.ok:
                # Routine: the VF says it runs what was written (its write was logged already).
                log.debug("%s itr confirmed: %s -> %s (%s)", a.target, a.old, a.applied, reason)
            else:
                self._log_applied(a, reason)
            cause = "confirmed" if a.setting == "itr_confirmed" else "read-back"
            decisions.append(Decision(t, a.target, a.setting, a.old, a.requested, a.applied, a.ok, reason, a.error,
                                      cause))
        return decisions

    def _apply_mode(self, pf: str, decision: ModeDecision, t: float) -> list[Decision]:
        # Modes are per PF on a mixed host (the host-wide capabilities keep only what all PFs
        # can): the driver refuses what its PF cannot do, once, and the retries back off.
        if not self.backoff.may_try(pf, "rx_mode", t):
            return []
        applied = self._call(
            lambda: self.host.set_pf_rx_mode(pf, decision.mode, decision.napi_budget,
                                             decision.cliff_pps, decision.epsilon),
            pf, "rx_mode", decision.mode,
        )
        st = self.pfs[pf]
        if applied.ok:
            st.mode = str(applied.applied)
            st.napi_budget = decision.napi_budget
        st.last_decision = decision.reason
        if not self._report(applied, decision.reason, t):
            return []
        return [Decision(t, pf, "rx_mode", applied.old, decision.mode, applied.applied, applied.ok,
                         decision.reason, applied.error)]

    def _report(self, a: Applied, reason: str, t: float) -> bool:
        """Log a write and say whether it gets a decision row: every success, but a failure only
        when it is news (the first of a run of failures, or a new error); retries back off."""
        if a.ok:
            if self.backoff.succeeded(a.target, a.setting):
                log.info("%s %s: writes work again", a.target, a.setting)
            self._log_applied(a, reason)
            return True
        news = self.backoff.failed(a.target, a.setting, t, a.error)
        if news:
            self._log_applied(a, reason)
        else:
            log.debug("%s %s: still failing: %s", a.target, a.setting, a.error)
        return news

    @staticmethod
    def _call(write: Callable[[], Applied], target: str, setting: str, requested: SettingValue) -> Applied:
        try:
            return write()
        except HostError as exc:
            return Applied(target, setting, requested, None, None, ok=False, error=str(exc))

    @staticmethod
    def _log_applied(a: Applied, reason: str) -> None:
        if a.ok:
            # Each probe of a search is detail (a search is ~15 of them); its start and end are not.
            # A write that changed nothing (a search's first probe written as the VF runs it,
            # to speed up its fetch) is detail too.
            level = logging.DEBUG if reason.startswith("probe") or a.old == a.applied else logging.INFO
            log.log(level, "%s %s: %s -> %s (%s)", a.target, a.setting, a.old, a.applied, reason)
        else:
            log.warning("%s %s: could not set %s: %s", a.target, a.setting, a.requested, a.error)

    # -- lifecycle ----------------------------------------------------------

    def recover(self) -> list[Applied]:
        """Before anything else: put back what an unfinished run left in the write journal,
        say so at WARNING and record it."""
        unfinished = self.store.unfinished_runs() if self.store is not None else []
        restored = self.host.restore()
        if not unfinished and not restored:
            return restored
        runs = ", ".join(f"run {r} (started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))})"
                         for r, t in unfinished) or "a run with no record"
        failed = [a for a in restored if not a.ok]
        log.warning("%s did not stop cleanly; restored %d setting(s) it left%s", runs,
                    len(restored) - len(failed), f", {len(failed)} could not be restored" if failed else "")
        t = self.wall(self.host.now())
        reason = f"restore after unclean stop ({runs})"
        for a in restored:
            self._log_applied(a, reason)
        if self.store is not None:
            self.store.record_decisions(
                [Decision(t, a.target, a.setting, a.old, a.requested, a.applied, a.ok, reason, a.error)
                 for a in restored])
            for run_id, _ in unfinished:
                self.store.stop_run(run_id, t, f"unclean; {len(restored) - len(failed)} restored at next start")
        return restored

    def start(self, detail: str = "") -> None:
        self.detail = detail
        self.recover()
        first = self.refresh_inventory()  # pins from config rules are set here, at once
        if self.store is not None:
            self._run_id = self.store.start_run(self.wall(self.host.now()), self.host.name, detail)
            self.store.record_decisions(first)
        with self.lock:
            self._count_decisions(first)
        # First snapshot only primes the rate deriver.
        self.tick()

    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set; the caller then calls shutdown().

        A tick that fails is skipped and the loop goes on: host sources report their own
        problems as snapshot errors, so what reaches here is a host condition we did not foresee
        or a bug. Only MAX_FAILED_TICKS failures in a row end the loop (and then, under
        systemd, the unpetted watchdog or the exit gets the service restarted)."""
        failed_in_a_row = 0
        while not stop.is_set():
            self.host.sleep(self.config.interval)
            if stop.is_set():
                break
            try:
                self.tick()
            except HostError as exc:
                log.warning("tick skipped: %s", exc)
                failed_in_a_row += 1
            except Exception:
                failed_in_a_row += 1
                if failed_in_a_row >= MAX_FAILED_TICKS:
                    raise
                if failed_in_a_row == 1:
                    log.exception("tick failed; skipped (the loop stops after %d in a row)", MAX_FAILED_TICKS)
            else:
                failed_in_a_row = 0
                self.heartbeat()

    def shutdown(self) -> list[Applied]:
        """Undo every write and record it: nothing is left on a port that is not accounted for."""
        # VFs at rest: their spans since they were last rated, at the rates in force then.
        resting = self._deriver.end_rest({pci: st.itr for pci, st in self.vfs.items()})
        restored = self.host.restore()
        t = self.wall(self.host.now())
        decisions = [
            Decision(t, a.target, a.setting, a.old, a.requested, a.applied, a.ok,
                     "restore on stop", a.error)
            for a in restored
        ]
        for a in restored:
            self._log_applied(a, "restore on stop")
        with self.lock:
            for st in self.vfs.values():
                st.itr, st.pending_itr = 0, None
            self._count_decisions(decisions)
        if self.store is not None:
            try:
                self._recorder.add(self.host.now(), [], [], resting)
                vf_rows, pf_rows = self._recorder.take()  # the part of a row before the stop
                if vf_rows or pf_rows:
                    self.store.record_tick(self.wall(max((s.t for s in vf_rows), default=self.host.now())),
                                           vf_rows, pf_rows, [])
                self.store.record_decisions(decisions)
                if self._run_id is not None:
                    self.store.stop_run(self._run_id, t, "clean")
            except Exception as exc:  # the host is restored; only its record is lost (locked or broken file)
                log.error("restore on stop not recorded in the history: %s", exc)
        return restored
