"""bench/latency_misses.py: the latency target's misses, told apart by the guest application's lost time."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from vftune.bench.scores import Cell, PairResult

BENCH = Path(__file__).resolve().parent.parent / "bench" / "latency_misses.py"
RR, BULK = "0000:03:10.0", "0000:03:10.1"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("latency_misses", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while it is made
    spec.loader.exec_module(module)
    return module


def _result(scenario: str, policy: str, score: float, lost_s: float) -> PairResult:
    """One rr VF over two 10-s phases whose guest lost lost_s of application time, and a bulk VF."""
    cells = {(RR, 0): Cell("rr", seconds=10.0, transactions=1.0, latency_s=1.0, app_lost_s=lost_s),
             (RR, 1): Cell("rr", seconds=10.0, transactions=1.0, latency_s=1.0),
             (BULK, 0): Cell("bulk", seconds=20.0, bits=1.0, delivered_bits=1.0, app_lost_s=20.0)}
    return PairResult(scenario, policy, 0, 20.0, 1.0, 0.1, 0.0, None, None, None, None, 0.0, cells=cells,
                      vf_scores={RR: score, BULK: 0.1})


def test_misses_are_the_latency_runs_beyond_five_percent_with_their_guests_lost_time():
    m = _module()
    results = [_result("starved", "vftune-latency", 0.2, 16.0), _result("starved", "vftune", 0.6, 12.0),
               _result("noisy", "vftune-latency", 0.9, 0.0), _result("noisy", "vftune", 0.97, 0.0),
               _result("fine", "vftune-latency", 0.96, 0.0)]
    found, total = m.misses(results, "vftune")
    assert total == 3  # rr VF-runs of vftune-latency; the bulk VF is not one
    assert [(x.scenario, x.score) for x in found] == [("starved", 0.2), ("noisy", 0.9)]
    assert found[0].starved == 0.8  # 16 of its 20 rr seconds, not the bulk VF's loss
    assert found[0].compared == (0.6, 0.6)
    lines = m.report(found, total, "vftune")
    assert "| 0.200 | starved | 0 | 0000:03:10.0 | 80% | 0.600, 60% |" in lines
    # 0.8 of the 0.9 summed shortfall (1 - score) is on the starved guest
    assert lines[-1] == ("2 of 3 request/response VF-runs beyond 5% of their best; 1 of them on guests whose "
                         "application lost more than 10% of the time, carrying 89% of the summed shortfall")


def test_bad_arguments_are_one_line_and_exit_2():
    for args in (["--seeds", "9-5"], ["--random", "-1"], ["--seeds", "0", "--random", "0", "--compare", "nope"]):
        run = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600)
        assert run.returncode == 2, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1 and "latency_misses.py:" in run.stderr
