"""Each NIC profile's interrupt-delay range: what a sweep covers and what the simulated host takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, quantize_itr
from vftune.sim.host import SimHost
from vftune.sim.nic import I82599, PRO1000, nic_profile
from vftune.sim.scenarios import register_file
from vftune.sim.sweep import default_grid, hardware_rates, sweep
from vftune.sim.validate import GEIST_DELAYS

PRO1000_HOST = """
name = "pro1000-bulk"
description = "one 1 GbE bulk receiver on a NetBurst-era host"

[host]
cores = 1
ports = 1
cpu_ghz = 1.6
nic = "pro1000"

[[guest]]
name = "rx"
vcpus = 1

[[vf]]
guest = "rx"
port = 0
[[vf.phase]]
at_s = 0
kind = "udp"
packet_bytes = 1500
"""


def _pro1000(tmp_path: Path) -> str:
    path = tmp_path / "pro1000.toml"
    path.write_text(PRO1000_HOST)
    return register_file(path)


def test_the_82599_keeps_its_hardware_range() -> None:
    assert (I82599.itr_min, I82599.itr_max) == (ITR_MIN_RATE, ITR_MAX_RATE)
    grid = default_grid()
    assert (grid[0], grid[-1]) == (956, 488281)
    assert hardware_rates() == sorted({quantize_itr(1e6 / (s * 2.048)) for s in range(1, 512)})


def test_pro1000_sweeps_its_own_delays_past_geists_longest() -> None:
    grid = default_grid(nic=PRO1000)
    longest_delay_units = 1e6 / grid[0] / 1.024
    assert longest_delay_units >= 2000
    assert longest_delay_units >= max(GEIST_DELAYS)  # validate's delays are deliverable
    assert grid[-1] == PRO1000.rate(1)
    assert all(b / a <= 1.04 + 1e-9 or b in PRO1000.hardware_rates() for a, b in zip(grid, grid[1:]))


def test_a_pro1000_scenario_sweeps_and_takes_rates_below_the_82599s_floor(tmp_path: Path) -> None:
    name = _pro1000(tmp_path)
    result = sweep(name)
    itrs = [p["itr"] for p in result["points"]]
    assert min(itrs) < ITR_MIN_RATE and 1e6 / min(itrs) >= 2000 * 1.024
    host = SimHost(name, speed=float("inf"))
    caps = host.capabilities()
    assert (caps.itr_min, caps.itr_max, caps.itr_unit_us) == (PRO1000.itr_min, PRO1000.itr_max, PRO1000.step_us)
    assert caps.quantize(slow := PRO1000.rate(2000)) == slow  # the tuner probes what this NIC delivers
    pci = next(iter(host.snapshot().vfs))
    applied = host.set_vf_itr(pci, slow)
    assert applied.ok and applied.applied == slow


def test_an_itr_outside_the_nic_range_is_refused_in_one_line(tmp_path: Path) -> None:
    host = SimHost(_pro1000(tmp_path), speed=float("inf"))
    pci = next(iter(host.snapshot().vfs))
    applied = host.set_vf_itr(pci, 100)
    assert not applied.ok and "outside 305..976562" in str(applied.error)
    with pytest.raises(ValueError, match="outside 956..488281"):
        sweep("udp-small", itrs=[500])


def test_an_unknown_nic_is_named() -> None:
    with pytest.raises(ValueError, match="unknown NIC 'x540'"):
        nic_profile("x540")
