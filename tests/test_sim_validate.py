"""`vftune sim validate`: every row says where it comes from, and the exit code tells the truth."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from vftune.cli import cli
from vftune.sim.validate import exit_code, run, tls_cost_fit

FIELDS = {"source", "quantity", "published", "simulated", "tolerance", "role", "verdict", "detail"}


def test_rows_cover_the_three_sources_and_the_exit_code_follows_the_verdicts() -> None:
    result = CliRunner().invoke(cli, ["sim", "validate", "--json"])
    body = json.loads(result.output)
    rows = body["rows"]
    assert len(rows) >= 30 and all(set(r) == FIELDS for r in rows)
    sources = {r["source"].split(",")[0] for r in rows}
    assert sources == {"Geist et al.", "Wu & Wang", "Salah & Qahtan"}
    assert {r["role"] for r in rows} == {"calibration", "validation"}
    assert [r["quantity"] for r in rows if r["role"] == "calibration"] == [
        "TCP cost fit a, b, c (jiffies per MB, 1000 packets, 1000 interrupts)"]
    assert all(r["verdict"] in ("PASS", "FAIL") for r in rows)
    failed = [r for r in rows if r["verdict"] == "FAIL"]
    assert result.exit_code == (1 if failed else 0) == body["exit"]
    assert all(r["detail"] for r in failed)  # every failure says why, or at least what was seen


def test_table_output_lists_every_row() -> None:
    result = CliRunner().invoke(cli, ["sim", "validate"])
    rows = run()
    assert result.exit_code == exit_code(rows)
    assert f"{len(rows)} rows:" in result.output and "calibration" in result.output


def test_total_least_squares_fit_recovers_a_known_plane() -> None:
    rng = np.random.default_rng(0)
    units = rng.uniform([50, 30, 1], [120, 90, 80], size=(40, 3))  # MB, kilopackets, kilo-interrupts
    t = units @ np.array([0.13, 0.37, 1.43])
    a, b, c = tls_cost_fit(np.column_stack([units, t]))
    assert np.allclose([a, b, c], [0.13, 0.37, 1.43], rtol=1e-6)
