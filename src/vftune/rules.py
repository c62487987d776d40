"""The config file (/etc/vftune/vftune.toml): [run] options and per-VF [[rule]]s.

    [run]                                # any `vftune run` option by its long name
    interval = 1.0
    [[rule]]                             # first matching rule wins
    match = { guest = "web-*" }          # or { uuid = "..." }, { vf = "0000:03:10.0" }, { pf = "0000:03:00.0" }
    objective = "latency"                # "balanced" (default) | "throughput" | "efficiency" | "latency"
    max_interval_us = 100
    [[rule]]
    match = { guest = "batch-*" }
    objective = "efficiency"
    margin = 0.05                        # give up to 5% of the VF's best for fewer interrupts
    [[rule]]
    match = { guest = "*" }
    pin_itr = 20000                      # or exclude = true

load() reads and checks a file, then its drop-ins (vftune.d/*.toml beside it, in name order:
their [run] values override the file's, their rules follow its), and returns every problem at
once, each naming the file, the key and the value in TOML's own spelling, so `vftune config
check` and a SIGHUP reload report the same lines. Rules set over the API (PUT /v1/rules) are
checked by the same code (parse_api_rules), kept in the state directory (save_api_rules) and
come before the files' rules. A rule's match keys are shell globs (fnmatch) and must all match;
`pf` matches the PF's PCI address or its interface name, `uuid` the guest's domain UUID (any
case). Imports nothing from the agent: the agent imports this.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vftune.config import RunConfig
from vftune.control.objective import MARGIN_RANGE
from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE
from vftune.textfile import read_bounded

DEFAULT_PATH = "/etc/vftune/vftune.toml"
OBJECTIVES = ("balanced", "throughput", "efficiency", "latency")
DEFAULT_OBJECTIVE = "balanced"
MARGIN_OBJECTIVES = ("balanced", "throughput", "efficiency")  # latency has no margin: response time first
MATCH_KEYS = ("pf", "vf", "guest", "uuid")
API_SOURCE = "api"  # a rule's source when it came from PUT /v1/rules
RULE_KEYS = ("match", "objective", "max_interval_us", "margin", "throughput_margin", "pin_itr", "exclude")
# [tuner]: what an operator may set of the tuner (docs/config.md); the rest are its constants.
TUNER_KEYS = ("objective", "margin", "max_interval_us", "restart_s", "restart_interrupts")
RESTART_S_RANGE = (10.0, 86_400.0)  # the periodic re-search: no more often than every 10 s
RESTART_INTERRUPTS_RANGE = (100_000, 10**12)
# The 82599's interval field: 2..1022 us.
MAX_INTERVAL_US_RANGE = (2.0, 1022.0)

# RunConfig fields whose `vftune run` option has another long name than the field's.
_LONG_NAMES = {"run_for": "for", "retention_h": "retention", "keep_warm_s": "keep-warm"}
_TYPES = {"str": str, "float": float, "int": int, "bool": bool}


def _run_options() -> dict[str, tuple[str, type]]:
    """`vftune run` options by long name -> (RunConfig field, value type), from RunConfig itself,
    so a new run option is a config key too (tests/test_config_file.py checks the CLI agrees)."""
    options = {}
    for f in fields(RunConfig):
        if f.name == "config":
            continue
        kind = _TYPES.get(str(f.type).split("|")[0].strip(), object)  # object: any TOML value
        options[_LONG_NAMES.get(f.name, f.name.replace("_", "-"))] = (f.name, kind)
    return options


# Options of `vftune run` that are not RunConfig fields: the CLI turns them into one.
RUN_OPTIONS = {**_run_options(), "scenario-file": ("scenario_files", str)}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config file: where, which key, what value, why."""

    file: str
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        value = "" if self.value is MISSING else f" = {toml_value(self.value)}"
        return f"{self.file}: {self.key}{value}: {self.message}"


MISSING = object()


def toml_value(value: object) -> str:
    """A value as TOML spells it (true, "text", { guest = "x" }), not as Python does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value) if math.isfinite(value) else ("nan" if value != value else ("inf" if value > 0 else "-inf"))
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


class ConfigError(ValueError):
    def __init__(self, problems: list[Problem], partial: ConfigFile | None = None) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems
        self.partial = partial  # what was good in it: `config check` looks further into that


@dataclass(frozen=True)
class VfTarget:
    """What a rule is matched against: one VF, its PF and its guest."""

    vf: str  # VF PCI address
    pf: str  # PF interface name
    pf_pci: str
    guest: str | None
    guest_uuid: str | None = None


@dataclass(frozen=True)
class Rule:
    """One [[rule]]: a match and what it sets. `index` is its place in the file, from 1."""

    index: int
    match: Mapping[str, str]
    objective: str | None = None
    max_interval_us: float | None = None
    margin: float | None = None
    pin_itr: int | None = None
    exclude: bool = False
    source: str | None = None  # the drop-in file or "api" it came from; None: the config file itself

    def matches(self, t: VfTarget) -> bool:
        for key, pattern in self.match.items():
            if key == "vf" and not fnmatch.fnmatchcase(t.vf.lower(), pattern.lower()):
                return False
            if key == "pf" and not (fnmatch.fnmatchcase(t.pf_pci.lower(), pattern.lower())
                                    or fnmatch.fnmatchcase(t.pf, pattern)):
                return False
            if key == "guest" and (t.guest is None or not fnmatch.fnmatchcase(t.guest, pattern)):
                return False
            if key == "uuid" and (t.guest_uuid is None or not fnmatch.fnmatchcase(t.guest_uuid.lower(), pattern.lower())):
                return False
        return True

    @property
    def label(self) -> str:
        what = ", ".join(f"{k}={v}" for k, v in self.match.items())
        return f"rule {self.index} ({what})" if self.source is None else f"{self.source} rule {self.index} ({what})"

    def as_dict(self) -> dict[str, Any]:
        """The rule as the API lists it: the file's keys, and where it came from."""
        out: dict[str, Any] = {"match": dict(self.match)}
        for key in ("objective", "max_interval_us", "margin", "pin_itr"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.exclude:
            out["exclude"] = True
        return out


@dataclass(frozen=True)
class VfRule:
    """What the rules say about one VF: the agent's input when it builds the VF's policy."""

    objective: str = DEFAULT_OBJECTIVE
    max_interval_us: float | None = None
    margin: float | None = None  # efficiency only; None: the objective's own
    pin_itr: int | None = None
    exclude: bool = False
    source: str | None = None  # the rule that matched, None = no rule

    @property
    def state(self) -> str | None:
        """"excluded" or "pinned" when a rule decides the VF's ITR itself; else None."""
        if self.exclude:
            return "excluded"
        return "pinned" if self.pin_itr is not None else None


NO_RULE = VfRule()


@dataclass(frozen=True)
class TunerSettings:
    """[tuner]: the goal of every VF no rule gives one, and the periodic re-search (the
    mission's: every restart_interrupts interrupts or restart_s seconds, whichever comes first;
    None: the tuner's own). The goal keys apply on reload; the restart keys on restart."""

    objective: str = DEFAULT_OBJECTIVE
    margin: float | None = None
    max_interval_us: float | None = None
    restart_s: float | None = None
    restart_interrupts: int | None = None

    def goal_of(self, rule: Rule | None) -> VfRule:
        """A matching rule's settings over these defaults (a rule that names another objective
        takes that objective's own margin unless it gives one)."""
        if rule is None:
            return VfRule(objective=self.objective, max_interval_us=self.max_interval_us, margin=self.margin)
        objective = rule.objective or self.objective
        margin = rule.margin if rule.margin is not None or objective != self.objective else self.margin
        max_us = rule.max_interval_us if rule.max_interval_us is not None else self.max_interval_us
        return VfRule(objective=objective, max_interval_us=max_us, margin=margin, pin_itr=rule.pin_itr,
                      exclude=rule.exclude, source=rule.label)


@dataclass(frozen=True)
class ConfigFile:
    path: str | None = None
    run: Mapping[str, Any] = field(default_factory=dict)  # RunConfig field -> value
    rules: tuple[Rule, ...] = ()
    # Set over the API (PUT /v1/rules): matched before the files' rules.
    api_rules: tuple[Rule, ...] = ()
    # The file each [run] value came from, when a drop-in set it (else `path`).
    run_sources: Mapping[str, str] = field(default_factory=dict)
    tuner: TunerSettings = TunerSettings()

    @property
    def all_rules(self) -> tuple[Rule, ...]:
        """Every rule in the order they are matched."""
        return self.api_rules + self.rules

    def listed(self) -> list[dict[str, Any]]:
        """Every rule, in match order, with its source (GET /v1/rules)."""
        return [{**r.as_dict(), "source": r.source or self.path or "config", "index": r.index} for r in self.all_rules]

    def rule_for(self, target: VfTarget) -> VfRule:
        """The first matching rule's settings over [tuner]'s; [tuner]'s alone when none matches."""
        for rule in self.all_rules:
            if rule.matches(target):
                return self.tuner.goal_of(rule)
        return self.tuner.goal_of(None)


EMPTY = ConfigFile()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_run(file: str, run: object, problems: list[Problem]) -> dict[str, Any]:
    if not isinstance(run, dict):
        problems.append(Problem(file, "run", run, "must be a table: [run]"))
        return {}
    values: dict[str, Any] = {}
    for key, value in run.items():
        name = key.replace("_", "-")
        where = f"run.{key}"
        if name not in RUN_OPTIONS:
            problems.append(Problem(file, where, value, f"not a `vftune run` option; known: {', '.join(RUN_OPTIONS)}"))
            continue
        attr, kind = RUN_OPTIONS[name]
        if kind is float and not _is_number(value):
            problems.append(Problem(file, where, value, "expected a number"))
        elif kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            problems.append(Problem(file, where, value, "expected a whole number"))
        elif kind is str and not isinstance(value, str):
            problems.append(Problem(file, where, value, "expected a string"))
        elif kind is bool and not isinstance(value, bool):
            problems.append(Problem(file, where, value, "expected true or false"))
        elif kind is float and value <= 0 and name in ("speed", "for", "interval", "retention"):
            problems.append(Problem(file, where, value, "must be positive"))
        elif attr == "scenario_files":
            values[attr] = (value,)  # click's multiple=True takes a sequence
        else:
            values[attr] = float(value) if kind is float else value
    return values


def _check_tuner(file: str, raw: object, problems: list[Problem]) -> dict[str, Any]:
    """[tuner]'s values by TunerSettings field; each bad one a problem."""
    if not isinstance(raw, dict):
        problems.append(Problem(file, "tuner", raw, "must be a table: [tuner]"))
        return {}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"tuner.{key}"
        if key not in TUNER_KEYS:
            problems.append(Problem(file, where, value, f"unknown tuner key; known: {', '.join(TUNER_KEYS)}"))
        elif key == "objective" and value not in OBJECTIVES:
            problems.append(Problem(file, where, value, f"choose from {', '.join(OBJECTIVES)}"))
        elif key == "objective":
            values[key] = value
        elif key == "restart_interrupts":
            least, most = RESTART_INTERRUPTS_RANGE
            if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
                problems.append(Problem(file, where, value, f"expected a whole number of interrupts in {least}..{most}"))
            else:
                values[key] = value
        else:
            low, high = {"margin": MARGIN_RANGE, "max_interval_us": MAX_INTERVAL_US_RANGE,
                         "restart_s": RESTART_S_RANGE}[key]
            if not _is_number(value) or not low <= value <= high:
                problems.append(Problem(file, where, value, f"expected a number in {low:g}..{high:g}"))
            else:
                values[key] = float(value)
    if "margin" in values and values.get("objective", DEFAULT_OBJECTIVE) not in MARGIN_OBJECTIVES:
        problems.append(Problem(file, "tuner.margin", values.pop("margin"),
                                "the latency objective takes no margin (response time first)"))
    return values


def _check_rule(file: str, index: int, raw: object, problems: list[Problem], source: str | None = None,
                where: str | None = None) -> Rule | None:
    where = where or f"rule[{index}]"
    if not isinstance(raw, dict):
        problems.append(Problem(file, where, raw, "must be a table: [[rule]]"))
        return None
    before = len(problems)
    for key in raw:
        if key not in RULE_KEYS:
            problems.append(Problem(file, f"{where}.{key}", raw[key], f"unknown rule key; known: {', '.join(RULE_KEYS)}"))
    match = raw.get("match", MISSING)
    if match is MISSING:
        problems.append(Problem(file, f"{where}.match", MISSING, "missing: e.g. match = { guest = \"web-*\" }"))
        match = {}
    elif not isinstance(match, dict) or not match:
        problems.append(Problem(file, f"{where}.match", match, f"must be a table with one or more of {', '.join(MATCH_KEYS)}"))
        match = {}
    for key, pattern in match.items():
        if key not in MATCH_KEYS:
            problems.append(Problem(file, f"{where}.match.{key}", pattern, f"match by {', '.join(MATCH_KEYS)}"))
        elif not isinstance(pattern, str) or not pattern:
            problems.append(Problem(file, f"{where}.match.{key}", pattern, "expected a non-empty string (a glob)"))
    objective = raw.get("objective")
    if objective is not None and objective not in OBJECTIVES:
        problems.append(Problem(file, f"{where}.objective", objective, f"choose from {', '.join(OBJECTIVES)}"))
    max_us = raw.get("max_interval_us")
    low, high = MAX_INTERVAL_US_RANGE
    if max_us is not None and (not _is_number(max_us) or not low <= max_us <= high):
        problems.append(Problem(file, f"{where}.max_interval_us", max_us, f"expected microseconds in {low:g}..{high:g}"))
    key = "margin" if "margin" in raw or "throughput_margin" not in raw else "throughput_margin"  # the old spelling
    margin = raw.get(key)
    low, high = MARGIN_RANGE
    if "margin" in raw and "throughput_margin" in raw:
        problems.append(Problem(file, f"{where}.throughput_margin", raw["throughput_margin"],
                                "the old spelling of margin: give one of the two"))
    elif margin is not None and (not _is_number(margin) or not low <= margin <= high):
        problems.append(Problem(file, f"{where}.{key}", margin,
                                f"expected a share of the VF's best merit in {low:g}..{high:g} (0.05 = 5%)"))
    elif margin is not None and (objective or DEFAULT_OBJECTIVE) not in MARGIN_OBJECTIVES:
        problems.append(Problem(file, f"{where}.{key}", margin,
                                f"only objective = {' or '.join(repr(o) for o in MARGIN_OBJECTIVES)} give up a margin "
                                "for fewer interrupts (the default objective is \"balanced\")"))
    pin = raw.get("pin_itr")
    if pin is not None and (not isinstance(pin, int) or isinstance(pin, bool) or not ITR_MIN_RATE <= pin <= ITR_MAX_RATE):
        problems.append(Problem(file, f"{where}.pin_itr", pin,
                                f"expected interrupts/s, a whole number in {ITR_MIN_RATE}..{ITR_MAX_RATE}"))
    exclude = raw.get("exclude", False)
    if not isinstance(exclude, bool):
        problems.append(Problem(file, f"{where}.exclude", exclude, "expected true or false"))
    elif exclude and (pin is not None or objective is not None or max_us is not None or margin is not None):
        problems.append(Problem(file, f"{where}.exclude", exclude, "an excluded VF is never written: "
                                "drop pin_itr, objective, max_interval_us and margin"))
    if pin is not None and (objective is not None or max_us is not None or margin is not None):
        problems.append(Problem(file, f"{where}.pin_itr", pin,
                                "a pinned VF is not tuned: drop objective, max_interval_us and margin"))
    if len(problems) > before:
        return None
    return Rule(index=index, match=dict(match), objective=objective,
                max_interval_us=float(max_us) if max_us is not None else None,
                margin=float(margin) if margin is not None else None, pin_itr=pin, exclude=exclude,
                source=source)


def parse(text: str, file: str = "<config>", source: str | None = None) -> tuple[ConfigFile, list[Problem]]:
    """The config in `text` and every problem found in it (an empty list: the file is good)."""
    problems: list[Problem] = []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return EMPTY, [Problem(file, "toml", MISSING, f"not valid TOML: {exc}")]
    except RecursionError:  # tomllib recurses once per level: [[[[...]]]] 5000 deep
        return EMPTY, [Problem(file, "toml", MISSING, "not valid TOML: arrays or tables nested too deeply")]
    for key, value in data.items():
        if key not in ("run", "tuner", "rule"):
            problems.append(Problem(file, key, value, "unknown section; the file has [run], [tuner] and [[rule]]"))
    run = _check_run(file, data.get("run", {}), problems)
    tuner = _check_tuner(file, data.get("tuner", {}), problems)
    raw_rules = data.get("rule", [])
    rules: list[Rule] = []
    if not isinstance(raw_rules, list):
        problems.append(Problem(file, "rule", raw_rules, "must be an array of tables: [[rule]]"))
    else:
        for i, raw in enumerate(raw_rules, start=1):
            rule = _check_rule(file, i, raw, problems, source)
            if rule is not None:
                rules.append(rule)
    return ConfigFile(path=file, run=run, rules=tuple(rules), tuner=TunerSettings(**tuner)), problems


def drop_in_dir(path: str) -> Path:
    """The drop-in directory of a config file: /etc/vftune/vftune.d for /etc/vftune/vftune.toml."""
    p = Path(path)
    return p.parent / f"{p.stem}.d"


def _read(path: str, problems: list[Problem]) -> str | None:
    try:
        return read_bounded(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problems.append(Problem(path, "file", MISSING, f"cannot read: {reason}"))
        return None


def load(path: str) -> ConfigFile:
    """Read and check a config file and its drop-ins; ConfigError lists every problem."""
    problems: list[Problem] = []
    text = _read(path, problems)
    if text is None:
        raise ConfigError(problems)
    config, problems = parse(text, path)
    run, rules = dict(config.run), list(config.rules)
    tuner = dataclasses.asdict(config.tuner)
    sources: dict[str, str] = {}
    folder = drop_in_dir(path)
    for drop_in in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        part_text = _read(str(drop_in), problems)
        if part_text is None:
            continue
        part, found = parse(part_text, str(drop_in), source=str(drop_in))
        problems += found
        run.update(part.run)
        sources.update(dict.fromkeys(part.run, str(drop_in)))
        tuner.update({k: v for k, v in dataclasses.asdict(part.tuner).items() if v != getattr(TunerSettings(), k)})
        rules += part.rules
    config = ConfigFile(path=path, run=run, rules=tuple(rules), run_sources=sources, tuner=TunerSettings(**tuner))
    if problems:
        raise ConfigError(problems, config)
    return config


def parse_api_rules(body: object, where: str = "PUT /v1/rules") -> tuple[Rule, ...]:
    """Rules sent over the API ({"rules": [...]}, each with a file rule's keys), checked as a
    file's are; ConfigError lists every problem."""
    problems: list[Problem] = []
    raw = body.get("rules", MISSING) if isinstance(body, Mapping) else MISSING
    if not isinstance(raw, list):
        raise ConfigError([Problem(where, "rules", MISSING if raw is MISSING else raw,
                                   'expected {"rules": [...]}, each rule with a [[rule]] table\'s keys')])
    extra = [k for k in body if k != "rules"] if isinstance(body, Mapping) else []
    for key in extra:
        problems.append(Problem(where, str(key), MISSING, 'unknown key; the body is {"rules": [...]}'))
    rules = [_check_rule(where, i, r, problems, API_SOURCE, where=f"rules[{i - 1}]") for i, r in enumerate(raw, start=1)]
    if problems:
        raise ConfigError(problems)
    return tuple(r for r in rules if r is not None)


def save_api_rules(path: Path, rules: tuple[Rule, ...]) -> None:
    """Keep the API's rules across restarts: written whole (a temporary file renamed over)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"rules": [r.as_dict() for r in rules]}, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_api_rules(path: Path) -> tuple[Rule, ...]:
    """The API's rules kept by save_api_rules (none when the file does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(str(path), "file", MISSING, f"cannot read: {exc}")]) from None
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ConfigError([Problem(str(path), "file", MISSING, f"not JSON: {exc}")]) from None
    return parse_api_rules(body, str(path))
