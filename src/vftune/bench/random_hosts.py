"""Random hosts: scenario files nobody wrote, drawn from a table of kinds and keys.

`vftune bench --random N` adds N of them per seed. Host `index` of seed `seed` is a pure
function of the two (its own random stream, keyed by both), so the same seed gives the same
hosts whatever else the command asks for; the file is checked by the scenario format like any
user's file (docs/scenarios.md) and run on that seed.

The draw is a table: per section ([host], [noise], [[guest]], [[vf]]) and per phase kind, the
keys and the values each may take, and how often the key is written at all (otherwise the
format's default holds). A key the scenario format does not know is drawn all the same (so
adding it to the format does not move the other draws) and left out of the file; a kind it
does not know is written as the receive kind nearest to it (STAND_IN). So a new key or kind
slots in by being added to the format, and a key or kind the format has but the table lacks
fails tests/test_random_hosts.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vftune.sim import scenario_file
from vftune.sim.scenarios import SCENARIOS, Scenario

PREFIX = "random"
MAX_RANDOM = 200  # hosts per seed: far beyond any bench worth running on a 2-core box


@dataclass(frozen=True)
class Key:
    """One key of a section: its values (drawn uniformly) and how often it is written."""

    name: str
    values: tuple[object, ...]
    p: float = 1.0


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


# Offered rates a sender may run at (bits/s), from a trickle to most of a 10 GbE port.
RATES = (1e7, 1e8, 5e8, 2e9, 6e9)
PACKETS = (64, 128, 512, 1500, 4000, 9000)
RTTS = (20, 60, 200, 1000)
WINDOWS = (16384, 262144, 4194304)

# Per phase kind, the keys drawn after `kind`. poll (a poll-mode driver in the guest) and
# tcp_tx (bulk TCP the guest sends) are drawn once the format has them.
KINDS: dict[str, tuple[Key, ...]] = {
    "tcp": (Key("packet_bytes", PACKETS), Key("offered_bps", RATES, 0.6), Key("rtt_us", RTTS),
            Key("window_bytes", WINDOWS, 0.3), Key("ramp_to_bps", RATES, 0.15)),
    "udp": (Key("packet_bytes", PACKETS), Key("offered_bps", RATES), Key("rtt_us", RTTS),
            Key("ramp_to_bps", RATES, 0.2)),
    "rr": (Key("request_bytes", (64, 400, 3000)), Key("response_bytes", (64, 1400, 20000)),
           Key("in_flight", (1, 2, 8, 32)), Key("service_us", (1, 5, 50)), Key("mtu", (1500, 4000, 9000), 0.25)),
    "idle": (),
    "poll": (Key("packet_bytes", PACKETS), Key("offered_bps", RATES), Key("ramp_to_bps", RATES, 0.15)),
    "tcp_tx": (Key("packet_bytes", (1500, 4000, 9000)), Key("offered_bps", RATES, 0.5), Key("rtt_us", RTTS),
               Key("window_bytes", WINDOWS, 0.3), Key("ramp_to_bps", RATES, 0.15)),
}
# The kinds' weights: the receive kinds as often as before the new ones came.
KIND_WEIGHTS: dict[str, float] = {"tcp": 1.0, "udp": 1.0, "rr": 1.0, "idle": 1.0, "poll": 0.4, "tcp_tx": 0.6}
# Until the format has a kind, the receive kind nearest to it stands in (with the kind's keys
# the format knows).
STAND_IN: dict[str, str] = {"poll": "udp", "tcp_tx": "tcp"}
# Drawn in this order; `cores` is overridden on an overcommitted host (below).
HOST: tuple[Key, ...] = (
    Key("cores", (2, 4, 12, 32)), Key("nic", ("82599", "82599", "pro1000")),
    Key("irq_time_accounting", (True, True, True, False)), Key("posted_interrupts", (True, False, False, False, False)),
    Key("counters", ("stock", "patched")), Key("guest_agent", (True, True, True, True, False)),
    Key("vf_itr_fetch_s", (0, 0.5, 2.0)),
)
NOISE: tuple[Key, ...] = (
    Key("sigma", (0.0, 0.03, 0.1, 0.3)), Key("burst", (1.0, 1.5, 4.0)),
    Key("microburst_ms", (1, 5, 20), 0.25), Key("microburst_gain", (2.0, 4.0, 8.0)),
)
GUEST: tuple[Key, ...] = (Key("vcpus", (1, 2, 4)), Key("app_cpu", (0.2, 0.5, 0.9), 0.3))
VF: tuple[Key, ...] = (Key("queues", (1, 2, 4), 0.25), Key("guest_agent", (True, False), 0.15),
                       Key("incast_group", (1, 2), 0.2))
# Keys of the format the table leaves at their defaults on purpose (names, sizes, timing of
# the VF's fetch in a search, cycle-level keys drawn by random_host itself).
NOT_DRAWN = {"name", "description", "duration_s", "cycle_s", "host", "noise", "guest", "vf", "pf", "phase",
             "at_s", "kind", "port", "cpu_ghz", "ports", "tcp_rmem_max", "vf_itr_fetch_busy_s", "vf_itr_busy_s",
             "memory_mb", "background_cpu", "pps", "overcommit"}  # overcommit: with its cores (random_host)
OVERCOMMIT_P = 0.15  # a host whose guests' vCPUs outnumber its cores twice over


def _known(section: str) -> set[str]:
    """The keys the scenario format accepts in a section."""
    return set(getattr(scenario_file, section, ()))


def _keys(rng: random.Random, keys: tuple[Key, ...], known: set[str]) -> list[str]:
    """Every key drawn (the stream does not depend on what the format knows), known ones written."""
    out = []
    for key in keys:
        written = rng.random() < key.p
        value = rng.choice(key.values)
        if written and key.name in known:
            out.append(f"{key.name} = {_toml(value)}")
    return out


def _phase(rng: random.Random, at: int) -> str:
    kind = rng.choices(list(KINDS), weights=[KIND_WEIGHTS[k] for k in KINDS])[0]
    keys = KINDS[kind]  # drawn as the kind's own, so the stream is the same once the format has it
    if kind not in scenario_file.KINDS:
        kind = STAND_IN[kind]
    lines = [f"at_s = {at}", f'kind = "{kind}"'] + _keys(rng, keys, _known("PHASE_KEYS"))
    if kind == "udp" and not any(line.startswith("offered_bps") for line in lines):
        lines.append(f"offered_bps = {RATES[2]!r}")  # a datagram sender has a rate
    if any(line.startswith("ramp_to_bps") for line in lines) and not any(
            line.startswith("offered_bps") for line in lines):
        lines = [line for line in lines if not line.startswith("ramp_to_bps")]  # a ramp needs a start
    return "[[vf.phase]]\n" + "\n".join(lines)


def random_host(name: str, rng: random.Random) -> str:
    """One valid scenario file (docs/scenarios.md), drawn from rng."""
    ports = rng.randint(1, 3)
    cycle = rng.choice([None, None, 7, 20, 45, 90])
    lines = [f'name = "{name}"', 'description = "a random host"', f"duration_s = {rng.choice([60, 120, 200])}"]
    if cycle:
        lines.append(f"cycle_s = {cycle}")
    host = _keys(rng, HOST, _known("HOST_KEYS"))
    noise = _keys(rng, NOISE, _known("NOISE_KEYS"))
    if not any(k.startswith("microburst_ms") for k in noise):  # the format takes the two together
        noise = [k for k in noise if not k.startswith("microburst_gain")]
    guests = rng.randint(1, 6)
    guest_lines = []
    vcpus = 0
    for g in range(guests):
        keys = _keys(rng, GUEST, _known("GUEST_KEYS"))
        vcpus += next((int(k.split("= ")[1]) for k in keys if k.startswith("vcpus")), 2)
        guest_lines += ["[[guest]]", f'name = "g{g}"', *keys]
    if rng.random() < OVERCOMMIT_P:
        host = [k for k in host if not k.startswith("cores")] + [f"cores = {max(1, vcpus // 2)}"]
        if "overcommit" in _known("HOST_KEYS"):
            host.append("overcommit = true")
    lines += ["[host]", f"ports = {ports}", *host, "[noise]", *noise, *guest_lines]
    for _ in range(rng.randint(1, 8)):
        lines.append("[[vf]]")
        if rng.random() < 0.9:
            lines.append(f'guest = "g{rng.randrange(guests)}"')
        lines.append(f"port = {rng.randrange(ports)}")
        lines += _keys(rng, VF, _known("VF_KEYS"))
        limit = cycle or 150
        first = 0 if rng.random() < 0.6 else rng.randrange(1, limit)
        starts = sorted({first} | {rng.randrange(0, limit) for _ in range(rng.randint(0, 2))})
        lines += [_phase(rng, at) for at in starts]
    if rng.random() < 0.3:
        lines += ["[[pf]]", f"port = {rng.randrange(ports)}", "[[pf.phase]]", "at_s = 0",
                  f"pps = {rng.choice([1000, 200000, 800000])}"]
    return "\n".join(lines) + "\n"


def host_name(seed: int, index: int) -> str:
    return f"{PREFIX}-s{seed}-{index}"


def draw(seed: int, index: int) -> str:
    """The scenario file of random host `index` of `seed`."""
    return random_host(host_name(seed, index), random.Random(f"vftune random host {seed} {index}"))


def register(seed: int, count: int) -> list[str]:
    """Draw `count` hosts for `seed`, make their names known to every command that takes a
    scenario name, and return the names. ValueError for a count out of range."""
    if not 0 <= count <= MAX_RANDOM:
        raise ValueError(f"random hosts per seed must be 0..{MAX_RANDOM}, got {count!r}")
    names = []
    for index in range(count):
        name = host_name(seed, index)
        parsed = scenario_file.parse(draw(seed, index), f"<{name}>")
        SCENARIOS[name] = Scenario(parsed.name, parsed.description, parsed.build, "random")
        names.append(name)
    return names


FAMILIES = ("built-in", "random", "file")


def family(scenario: str) -> str:
    """Which family the bench reports a scenario in: built-in, random (drawn here) or file (a
    user's scenario file)."""
    known = SCENARIOS.get(scenario)
    source = known.source if known is not None else "file"
    return source if source in FAMILIES else "file"
