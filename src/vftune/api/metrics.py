"""Prometheus metrics read from the agent's view at scrape time (no second copy of the state).

Conventions (Prometheus' naming guide, checked by `promtool check metrics` in the tests):
counters in base units with _total (bytes, packets, interrupts), rates left to PromQL's rate();
the ITR a VF runs as vftune_vf_itr_interrupts_per_second, absent while the VF follows its own
adaptive ITR, which vftune_vf_itr_adaptive says (1) instead of a magic 0.
contrib/grafana-vftune.json queries these names; tests/test_metrics.py checks it against a live scrape.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from vftune import __version__
from vftune.model import DROPS_SOURCES, RX_MODES, TICK_BUCKETS, VF_STATES, AgentView

VF_LABELS = ["pci", "pf", "guest"]
# model.VF_TOTALS key -> (metric name, help)
VF_COUNTERS = {
    "rx_bytes": ("vftune_vf_receive_bytes", "Bytes the VF received (its PF's per-VF counters)"),
    "tx_bytes": ("vftune_vf_transmit_bytes", "Bytes the VF transmitted"),
    "rx_packets": ("vftune_vf_receive_packets", "Packets the VF received"),
    "tx_packets": ("vftune_vf_transmit_packets", "Packets the VF transmitted"),
    "interrupts": ("vftune_vf_interrupts", "Interrupts of the VF's vectors the host saw (not with posted interrupts)"),
}


class AgentCollector(Collector):
    def __init__(self, view: Callable[[], AgentView]) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        view = self.view()
        counters = {key: CounterMetricFamily(name, text, labels=VF_LABELS) for key, (name, text) in VF_COUNTERS.items()}
        itr = GaugeMetricFamily("vftune_vf_itr_interrupts_per_second",
                                "Interrupt rate the agent set on the VF; absent while the VF follows its adaptive ITR",
                                labels=VF_LABELS)
        adaptive = GaugeMetricFamily("vftune_vf_itr_adaptive", "1 while the VF follows its own adaptive ITR",
                                     labels=VF_LABELS)
        state = GaugeMetricFamily("vftune_vf_state", "1 for the VF's phase: " + ", ".join(VF_STATES),
                                  labels=[*VF_LABELS, "state", "objective"])
        cpu = GaugeMetricFamily("vftune_vf_guest_cpu_ratio",
                                "CPU seconds per second of the VF's guest over the last tick", labels=VF_LABELS)
        irq_cpu = GaugeMetricFamily("vftune_vf_guest_irq_cpu_ratio",
                                    "CPU seconds per second the VF's guest spent in its own interrupt and softirq "
                                    "handling (its guest agent's guest-get-cpustats); absent when unknown",
                                    labels=VF_LABELS)
        drops = GaugeMetricFamily("vftune_vf_socket_drops_per_second",
                                  "Datagrams per second the VF's guest dropped at its sockets on receive over the last "
                                  "tick (its guest agent's UDP RcvbufErrors); absent when unknown", labels=VF_LABELS)
        # One series per source, 1 for the one in force (node_exporter's systemd unit_state style):
        # a fixed label set, no series churn when a guest's agent comes and goes.
        drops_source = GaugeMetricFamily("vftune_vf_socket_drops_source",
                                         "1 for where the VF's socket drops come from, or why they are unknown: "
                                         + ", ".join(DROPS_SOURCES), labels=[*VF_LABELS, "source"])
        merit = GaugeMetricFamily("vftune_vf_merit_change_vs_adaptive_ratio",
                                  "The VF's merit at its set rate against its adaptive ITR (throughput, or "
                                  "transaction rate for request/response loads): 0.12 = 12% better; absent while "
                                  "it runs its adaptive ITR or is not measured on both sides", labels=[*VF_LABELS, "merit"])
        per_gbit = GaugeMetricFamily("vftune_vf_cpu_per_gbit_change_vs_adaptive_ratio",
                                     "CPU per Gb at the VF's set rate against its adaptive ITR: -0.1 = 10% cheaper",
                                     labels=VF_LABELS)
        cores = GaugeMetricFamily("vftune_vf_cpu_change_vs_adaptive_cores",
                                  "CPU seconds per second the VF's set rate spends (+) or saves (-) against its "
                                  "adaptive ITR at its throughput now", labels=VF_LABELS)
        for vf in view.vfs:
            values = [vf.pci, vf.pf, vf.guest or ""]
            if vf.vs_adaptive is not None:
                merit.add_metric([*values, vf.vs_adaptive.merit], vf.vs_adaptive.merit_change)
                per_gbit.add_metric(values, vf.vs_adaptive.cpu_per_gbit_change)
                cores.add_metric(values, vf.vs_adaptive.cpu_change_cores)
            for key, family in counters.items():
                if key in vf.totals:
                    family.add_metric(values, round(vf.totals[key]))  # whole packets and bytes
            if vf.itr:
                itr.add_metric(values, vf.itr)
            adaptive.add_metric(values, 0.0 if vf.itr else 1.0)
            for s in VF_STATES:
                state.add_metric([*values, s, vf.objective], 1.0 if vf.state == s else 0.0)
            if vf.guest_cpu is not None:
                cpu.add_metric(values, vf.guest_cpu)
            if vf.guest_irq_cpu is not None:
                irq_cpu.add_metric(values, vf.guest_irq_cpu)
            if vf.rx_dropped_pps is not None:
                drops.add_metric(values, vf.rx_dropped_pps)
            for source in DROPS_SOURCES:
                drops_source.add_metric([*values, source], 1.0 if vf.rx_dropped_source == source else 0.0)
        yield from counters.values()
        yield from (itr, adaptive, state, cpu, irq_cpu, drops, drops_source, merit, per_gbit, cores)
        host_vfs = GaugeMetricFamily("vftune_vs_adaptive_vfs",
                                     "VFs under a set rate measured against their adaptive ITR on both sides")
        host_vfs.add_metric([], float(view.vs_adaptive.vfs if view.vs_adaptive else 0))
        yield host_vfs
        if view.vs_adaptive is not None:
            host_cores = GaugeMetricFamily("vftune_vs_adaptive_cpu_change_cores",
                                           "CPU seconds per second all set rates spend (+) or save (-) against "
                                           "the VFs' adaptive ITRs")
            host_cores.add_metric([], view.vs_adaptive.cpu_change_cores)
            yield host_cores

        mode = GaugeMetricFamily("vftune_pf_rx_mode",
                                 "1 for the receive mode the PF runs now (de or napi; hybrid when the driver does "
                                 "not say which)", labels=["pf", "mode"])
        switches = CounterMetricFamily("vftune_pf_rx_mode_switches", "DE/NAPI switches of the PF since start",
                                       labels=["pf"])
        for pf in view.pfs:
            now = pf.mode_now or pf.mode
            for m in sorted(set(RX_MODES) | set(view.capabilities.rx_modes) | {now}):
                mode.add_metric([pf.name, m], 1.0 if now == m else 0.0)
            if pf.switches is not None:
                switches.add_metric([pf.name], pf.switches)
        yield from (mode, switches)

        decisions = CounterMetricFamily("vftune_decisions",
                                        "Settings the agent wrote (or tried to), by setting and cause",
                                        labels=["setting", "cause"])
        for (setting, cause), n in sorted(view.decisions.items()):
            decisions.add_metric([setting, cause], n)
        yield decisions

        if view.tick_times is not None:
            t = view.tick_times
            cumulative, buckets = 0, []
            for bound, n in zip((*[f"{b:g}" for b in TICK_BUCKETS], "+Inf"), t.counts):
                cumulative += n
                buckets.append((bound, float(cumulative)))
            yield HistogramMetricFamily("vftune_tick_duration_seconds",
                                        "Wall time of one agent tick (snapshot, policies, writes, store)",
                                        buckets=buckets, sum_value=t.sum_s)
        ticks = CounterMetricFamily("vftune_agent_ticks", "Agent ticks since start")
        ticks.add_metric([], view.ticks)
        yield ticks
        if view.last_tick_wall is not None:
            last = GaugeMetricFamily("vftune_last_tick_timestamp_seconds", "Unix time of the last tick")
            last.add_metric([], view.last_tick_wall)
            yield last
        saved = view.cost_model.get("saved_cpu_s_per_s")
        if isinstance(saved, float | int):
            cpu_saved = GaugeMetricFamily("vftune_cpu_saved_vs_adaptive_ratio",
                                  "CPU seconds per second the set ITRs save against the VFs' adaptive ITR "
                                  "(negative: spent), from the cost model fit")
            cpu_saved.add_metric([], float(saved))
            yield cpu_saved
        info = GaugeMetricFamily("vftune_build_info", "vftune's version and Python, always 1",
                                 labels=["version", "python", "backend"])
        info.add_metric([__version__, platform.python_version(), view.backend], 1.0)
        yield info


def build_registry(view: Callable[[], AgentView], agent_pid: int | None = None) -> CollectorRegistry:
    """The agent's metrics plus its process' (CPU, memory, file descriptors, Python). When the API
    runs in a process of its own (agent_pid given), process_* are still the agent's, and
    vftune_api_process_* the API process'."""
    registry = CollectorRegistry()
    registry.register(AgentCollector(view))
    if agent_pid is None:
        ProcessCollector(registry=registry)
    else:
        ProcessCollector(pid=lambda: agent_pid, registry=registry)
        ProcessCollector(namespace="vftune_api", registry=registry)
    PlatformCollector(registry=registry)
    return registry
