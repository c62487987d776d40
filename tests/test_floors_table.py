"""bench/floors_table.py: the frontier's floor target applied to every policy of a bench run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "floors_table.py"


def _row(scenario: str, policy: str, geomean: float, low: float, cpu: float, family: str = "random") -> dict:
    return {"scenario": scenario, "family": family, "policy": policy, "vf_geomean": geomean, "vf_min": low,
            "cpu_per_gbps_vs_default": cpu}


RESULTS = [
    # a: the frontier meets the floors, vftune too at 1.2x its CPU, the default not
    _row("a", "frontier", 0.98, 0.95, 1.0), _row("a", "vftune", 0.975, 0.92, 1.2), _row("a", "default", 0.9, 0.8, 1.0),
    # b: the frontier meets them, nobody else does
    _row("b", "frontier", 0.97, 0.90, 0.5), _row("b", "vftune", 0.96, 0.95, 0.5), _row("b", "default", 0.5, 0.1, 0.5),
    # c: the frontier misses them: not judged
    _row("c", "frontier", 0.90, 0.50, 1.0), _row("c", "vftune", 0.99, 0.99, 1.0), _row("c", "default", 0.99, 0.99, 1.0),
]


def test_each_policy_is_judged_where_the_frontier_meets_the_floors(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"results": RESULTS}))
    out = subprocess.run([sys.executable, str(BENCH), str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert "| random | vftune | 1 of 2 | 1.100x | 1 |" in lines  # (1.2 + 1.0) / 2; 1.2x above 1.1x
    assert "| random | default | 0 of 2 | 1.000x | 0 |" in lines
    assert "| random | none of them | 1 of 2 met by no policy above | | |" in lines
    assert not any("frontier |" in line or "| c |" in line for line in lines)


def test_a_missing_or_wrong_file_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip().startswith("usage: floors_table.py")
    (tmp_path / "other.json").write_text('{"runs": []}')
    for name in ("absent.json", "other.json"):
        run = subprocess.run([sys.executable, str(BENCH), str(tmp_path / name)], capture_output=True, text=True)
        assert run.returncode == 2
        assert len(run.stderr.strip().splitlines()) == 1 and name in run.stderr


def test_the_table_reads_the_benchs_own_floor_constants():
    spec = importlib.util.spec_from_file_location("floors_table", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from vftune.bench.targets import GEOMEAN_SCORE, MIN_SCORE
    just_under = [_row("a", "frontier", GEOMEAN_SCORE, MIN_SCORE, 1.0),
                  _row("a", "vftune", GEOMEAN_SCORE - 1e-6, MIN_SCORE, 1.0)]
    assert "| random | vftune | 0 of 1 | 1.000x | 0 |" in module.table(just_under)
