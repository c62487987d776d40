"""The frontier targets applied to every policy of a `vftune bench --json` run, not only vftune.

The bench judges vftune where the frontier meets the score floors (per-VF geomean >= 0.97 and
min >= 0.90, bench/targets.py). The frontier holds a fixed rate per phase chosen knowing every
phase in advance; this table asks how far any policy that decides online gets on the same
scenarios, so that a FAIL can be read as the tuner's or as the target's:

    .venv/bin/vftune bench --seeds 0-4 --random 20 --json > /tmp/bench.json
    .venv/bin/python bench/floors_table.py /tmp/bench.json

Per family and policy, over the scenarios (seeds' means) where the frontier meets the floors:
how many the policy meets too, and its CPU per Gb over the frontier's (mean, and how many
scenarios above the per-scenario bound); then how many of them no policy in the run meets.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from vftune.bench.registry import FRONTIER, ORACLE
from vftune.bench.targets import CPU_PER_SCENARIO, meets_floors


def table(results: list[dict[str, Any]]) -> list[str]:
    by = {(r["scenario"], r["policy"]): r for r in results}
    families = sorted({r["family"] for r in results})
    policies = list(dict.fromkeys(r["policy"] for r in results if r["policy"] not in (FRONTIER, ORACLE)))
    out = ["| family | policy | floors met where the frontier meets them | CPU per Gb / frontier's, mean "
           f"| scenarios above {CPU_PER_SCENARIO}x |", "|---|---|---|---|---|"]
    for family in families:
        judged = [r["scenario"] for r in results if r["family"] == family and r["policy"] == FRONTIER
                  and meets_floors(r)]
        for policy in policies:
            rows = [(by[(s, policy)], by[(s, FRONTIER)]) for s in judged if (s, policy) in by]
            if not rows:
                continue
            met = sum(meets_floors(r) for r, _ in rows)
            ratios = [r["cpu_per_gbps_vs_default"] / f["cpu_per_gbps_vs_default"] for r, f in rows
                      if r["cpu_per_gbps_vs_default"] is not None and f["cpu_per_gbps_vs_default"]]
            mean = f"{sum(ratios) / len(ratios):.3f}x" if ratios else "-"
            over = sum(x > CPU_PER_SCENARIO for x in ratios)
            out.append(f"| {family} | {policy} | {met} of {len(rows)} | {mean} | {over} |")
        unmet = [s for s in judged if not any(meets_floors(by[(s, p)]) for p in policies if (s, p) in by)]
        out.append(f"| {family} | none of them | {len(unmet)} of {len(judged)} met by no policy above | | |")
    return out


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: floors_table.py BENCH.json (vftune bench --json's output)", file=sys.stderr)
        sys.exit(2)
    try:
        with open(sys.argv[1]) as f:
            results = json.load(f)["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"floors_table.py: {sys.argv[1]}: not a bench JSON ({type(exc).__name__}: {exc})", file=sys.stderr)
        sys.exit(2)
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
