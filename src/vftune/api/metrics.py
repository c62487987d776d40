"""Prometheus metrics read from the agent's state at scrape time (no second copy of the state)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from vftune.agent.loop import Agent


class AgentCollector(Collector):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["pci", "pf", "guest"]
        itr = GaugeMetricFamily("vftune_vf_itr", "Interrupt rate set on the VF (0 = VF adaptive)", labels=labels)
        rx_bps = GaugeMetricFamily("vftune_vf_rx_bits_per_second", "VF receive rate", labels=labels)
        tx_bps = GaugeMetricFamily("vftune_vf_tx_bits_per_second", "VF transmit rate", labels=labels)
        rx_pps = GaugeMetricFamily("vftune_vf_rx_packets_per_second", "VF receive packet rate", labels=labels)
        ints = GaugeMetricFamily("vftune_vf_interrupts_per_second", "VF interrupts seen by the host", labels=labels)
        mode = GaugeMetricFamily("vftune_pf_rx_mode", "PF receive mode in force (1 for the active mode)",
                                 labels=["pf", "mode"])
        ticks = CounterMetricFamily("vftune_agent_ticks", "Agent ticks since start")
        with self.agent.lock:
            for vf in self.agent.inventory.vfs():
                st = self.agent.vfs.get(vf.pci)
                values = [vf.pci, vf.pf, vf.guest.name if vf.guest else ""]
                itr.add_metric(values, st.itr if st else 0)
                s = st.sample if st else None
                if s is not None:
                    rx_bps.add_metric(values, s.rx_bps)
                    tx_bps.add_metric(values, s.tx_bps)
                    rx_pps.add_metric(values, s.rx_pps)
                    if s.interrupts_per_s is not None:
                        ints.add_metric(values, s.interrupts_per_s)
            for name, pf in self.agent.pfs.items():
                for m in self.agent.caps.rx_modes:
                    mode.add_metric([name, m], 1.0 if pf.mode == m else 0.0)
            ticks.add_metric([], self.agent.ticks)
        yield from (itr, rx_bps, tx_bps, rx_pps, ints, mode, ticks)
