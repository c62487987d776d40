"""Prometheus metrics read from the agent's view at scrape time (no second copy of the state)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from vftune.model import AgentView


class AgentCollector(Collector):
    def __init__(self, view: Callable[[], AgentView]) -> None:
        self.view = view

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
        view = self.view()
        for vf in view.vfs:
            values = [vf.pci, vf.pf, vf.guest or ""]
            itr.add_metric(values, vf.itr)
            if vf.rx_bps is not None and vf.tx_bps is not None and vf.rx_pps is not None:
                rx_bps.add_metric(values, vf.rx_bps)
                tx_bps.add_metric(values, vf.tx_bps)
                rx_pps.add_metric(values, vf.rx_pps)
            if vf.interrupts_per_s is not None:
                ints.add_metric(values, vf.interrupts_per_s)
        for pf in view.pfs:
            for m in view.capabilities.rx_modes:
                mode.add_metric([pf.name, m], 1.0 if pf.mode == m else 0.0)
        ticks.add_metric([], view.ticks)
        yield from (itr, rx_bps, tx_bps, rx_pps, ints, mode, ticks)
