"""Turn `vftune bench --json` into the compact Markdown table README.md carries.

    .venv/bin/vftune bench --seed 0 --json > /tmp/bench.json
    .venv/bin/python bench/readme_table.py /tmp/bench.json
"""

from __future__ import annotations

import json
import sys

from vftune.bench.registry import ORACLE
from vftune.bench.registry import POLICIES as REGISTRY

# vftune first, then the others in the benchmark's order; the oracle is the reference (1.000).
POLICIES = ["vftune", *(p for p in REGISTRY if p not in ("vftune", ORACLE))]


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    rows: dict[str, dict[str, dict]] = {}
    for r in data["results"]:
        rows.setdefault(r["scenario"], {})[r["policy"]] = r
    print("Throughput as a ratio of the oracle's (the best fixed ITR of each phase per VF):\n")
    vftune_columns = "vftune CPU / default | vftune converge s | vftune search probes cold (after a phase change)"
    print("| scenario | " + " | ".join(POLICIES) + f" | {vftune_columns} |")
    print("|---" * (len(POLICIES) + 4) + "|")
    for scenario, by_policy in rows.items():
        ratios = " | ".join(f"{by_policy[p]['throughput_ratio']:.3f}" for p in POLICIES)
        v, d = by_policy["vftune"], by_policy["default"]
        probes = f"{v['search_probes_cold']}" + (
            f" ({v['search_probes_phase']})" if v.get("search_probes_phase") is not None else "")
        print(f"| {scenario} | {ratios} | {v['cpu']:.3f} / {d['cpu']:.3f} | {v['converge_s']:.0f} | {probes} |")
    print()
    for line in data.get("targets", []):
        print(f"- {'PASS' if line['ok'] else 'FAIL'} {line['target']}: {line['detail']}")


if __name__ == "__main__":
    main(sys.argv[1])
