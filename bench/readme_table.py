"""Turn `vftune bench --json` into the Markdown tables README.md carries.

    .venv/bin/vftune bench --seeds 0-4 --json > /tmp/bench.json
    .venv/bin/python bench/readme_table.py /tmp/bench.json

Two tables: per policy, its scores over every scenario (means of the seeds' means); per
scenario, every policy's per-VF geometric mean (mean ± 95% interval over the seeds) and
vftune's other scores. Then the targets, PASS/FAIL with their numbers, any oracle warning, and
the scenarios where the score and CPU targets conflict (targets.conflicts).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from vftune.bench.registry import ORACLE
from vftune.bench.registry import POLICIES as REGISTRY

PEERS = [p for p in REGISTRY if p not in ("vftune", ORACLE)]


def _f(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ci(row: dict[str, Any], name: str, spec: str = ".3f") -> str:
    value = row.get(name)
    if value is None:
        return "-"
    ci = (row.get("ci95") or {}).get(name)
    return format(value, spec) + (f" ±{format((ci[1] - ci[0]) / 2, spec)}" if ci else "")


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def summary(rows: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    out = ["| policy | per-VF geomean, mean | per-VF geomean, worst scenario | per-VF min, worst scenario "
           "| CPU per Gb vs default, mean | scenarios > 1% below default |",
           "|---|---|---|---|---|---|"]
    for policy in ["vftune", *PEERS]:
        mine = [by[policy] for by in rows.values() if policy in by]
        if not mine:
            continue
        gm = [r["vf_geomean"] for r in mine]
        worst = min(mine, key=lambda r: r["vf_geomean"] if r["vf_geomean"] is not None else -1.0)
        low = min(mine, key=lambda r: r["vf_min"] if r["vf_min"] is not None else -1.0)
        below = sum(1 for s, by in rows.items() if policy in by and by.get("default")
                    and (by[policy]["vf_geomean"] or 0) < (by["default"]["vf_geomean"] or 0) * 0.99)
        name = f"**{policy}**" if policy == "vftune" else policy
        out.append(f"| {name} | {_f(_mean(gm), '.3f')} | {_f(worst['vf_geomean'], '.3f')} ({worst['scenario']}) "
                   f"| {_f(low['vf_min'], '.3f')} ({low['scenario']}) "
                   f"| {_f(_mean([r['cpu_per_gbps_vs_default'] for r in mine]), '.2f')} | {below} of {len(mine)} |")
    return out


def per_scenario(rows: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    policies = [p for p in PEERS if any(p in by for by in rows.values())]
    head = ("| scenario | " + " | ".join(policies) + " | **vftune** | vftune VF min | vftune CPU/Gb vs default "
            "| rr mean / p99 us, vftune (oracle) | vftune converge / reconverge s | vftune setting chg/min |")
    out = [head, "|---" * (len(policies) + 7) + "|"]
    for scenario, by in rows.items():
        v, o = by.get("vftune"), by.get(ORACLE, {})
        cells = [_ci(by[p], "vf_geomean") if p in by else "-" for p in policies]
        if v is None:
            out.append(f"| {scenario} | " + " | ".join(cells) + " | - | - | - | - | - | - |")
            continue
        rr = "-"
        if v.get("latency_us_mean") is not None:
            rr = (f"{v['latency_us_mean']:.1f} / {v['latency_us_p99']:.1f} "
                  f"({_f(o.get('latency_us_mean'), '.1f')} / {_f(o.get('latency_us_p99'), '.1f')})")
        out.append(f"| {scenario} | " + " | ".join(cells) + f" | **{_ci(v, 'vf_geomean')}** | {_ci(v, 'vf_min')} "
                   f"| {_ci(v, 'cpu_per_gbps_vs_default', '.2f')} | {rr} "
                   f"| {_f(v['converge_s'], '.0f')} / {_f(v['reconverge_s'], '.0f')} | {_f(v['changes_per_min'], '.2f')} |")
    return out


def families(data: dict[str, Any]) -> list[str]:
    """The headline: per family (built-in scenarios, random hosts) and policy, the mean per-VF
    geomean, the lowest VF min, and CPU per Gb against the default and the frontier."""
    out = ["| family | policy | scenarios | per-VF geomean, mean | lowest VF min | CPU per Gb vs default | "
           "CPU per Gb vs frontier | VF-runs above the oracle + 2% |", "|---|---|---|---|---|---|---|---|"]
    for f in data.get("families", []):
        name = f"**{f['policy']}**" if f["policy"] == "vftune" else f["policy"]
        out.append(f"| {f['family']} | {name} | {f['scenarios']} | {_f(f['vf_geomean'], '.3f')} | "
                   f"{_f(f['vf_min'], '.3f')} ({f['vf_min_scenario']}) | {_f(f['cpu_per_gbps_vs_default'], '.2f')} | "
                   f"{_f(f['cpu_per_gbps_vs_frontier'], '.2f')} | {f['vfs_above_oracle']} |")
    return out


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    if data.get("families"):
        print("By family (means over scenarios of the seeds' means):\n")
        print("\n".join(families(data)))
        print()
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for r in data["results"]:
        if r.get("family") == "random":  # one host per seed: in the family table only
            continue
        rows.setdefault(r["scenario"], {})[r["policy"]] = r
    seeds = ",".join(map(str, data.get("seeds", [])))
    print(f"Per-VF scores against the oracle (each VF's best fixed ITR per phase, its neighbours at theirs), "
          f"seeds {seeds}, objective {data.get('objective', 'throughput')}:\n")
    print("\n".join(summary(rows)))
    print("\nPer scenario, per-VF geometric mean (mean ± 95% interval over the seeds):\n")
    print("\n".join(per_scenario(rows)))
    print()
    for line in data.get("targets", []):
        print(f"- {'PASS' if line['ok'] else 'FAIL'} {line['target']}: {line['detail']}")
    for warning in data.get("oracle_warnings", []):
        print(f"- ORACLE WRONG: {warning}")
    for conflict in data.get("conflicts", []):
        print(f"- CONFLICT: {conflict}")


if __name__ == "__main__":
    main(sys.argv[1])
