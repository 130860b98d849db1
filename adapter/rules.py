"""The prometheus-adapter rules file (`rules`, `externalRules`, `resourceRules`), read as-is.

Parsing checks the shape; `naming.compile_rules` then compiles regexes and templates. Every
problem is reported as one line naming the rule and field: `rules[2].metricsQuery: ...`.
Unknown fields are tolerated (newer prometheus-adapter versions add some) but logged.

`forecast:` (on a rule or an external rule) is promscaler's one addition to the format: a metric
served beside the rule's own, computed in PromQL from history (`adapter.forecast`). Being ours,
its fields are checked strictly: an unknown key in it is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from promscaler.times import DurationError, parse_duration

__all__ = [
    "DiscoveryRule",
    "Forecast",
    "GroupResource",
    "NameMapping",
    "RegexFilter",
    "ResourceMapping",
    "RuleError",
    "RulesConfig",
    "forecast_options",
    "load_rules",
    "parse_rules",
    "seasonal_misfit",
]

log = logging.getLogger("adapter.rules")


class RuleError(ValueError):
    """An invalid rules file; the message names the rule index and field."""


@dataclass(frozen=True)
class GroupResource:
    group: str = ""
    resource: str = ""


@dataclass(frozen=True)
class RegexFilter:
    is_: str = ""
    is_not: str = ""


@dataclass(frozen=True)
class NameMapping:
    matches: str = ""
    as_: str = ""


@dataclass(frozen=True)
class ResourceMapping:
    template: str = ""
    overrides: Mapping[str, GroupResource] = field(default_factory=dict)
    namespaced: bool | None = None


@dataclass(frozen=True)
class Forecast:
    """A rule's `forecast:` block; durations in seconds.

    `seasonal`: the value one `season` ago, `horizon` ahead, times the ratio of the mean over the
    last `levelWindow` to the mean over the same window one season ago (at most `maxLevelRatio`).
    `seasons: [7d, 1d]` lists several, longest first: each series is forecast with the longest
    one whose window one season ago is whole, else the next; `season: 1d` is `seasons: [1d]`.
    Against noise (bursty load): `pastSeasons: k` combines the last k seasons at the same phase
    (`combine`: mean, median, max or a `quantile`), `envelope` reads what the `horizon` after that
    phase held (mean, max or a `quantile` of it) instead of its one instant (`last`), and `margin`
    multiplies the forecast. Their defaults (1, mean, last, none) are the forecast as it was.
    `linear`: the least-squares trend over the last `window`, `horizon` ahead, never below zero.
    Windows are sampled every `resolution` (the PromQL subquery step). Without history there is
    no value, unless `fallback: present` serves the present value then."""

    path: str  # "rules[0].forecast", for error messages
    method: Literal["seasonal", "linear"]
    horizon: float
    name: str = ""  # the served name, expanded like name.as (`${1}_forecast`); "" = "<metric>_forecast"
    seasons: tuple[float, ...] = ()  # seasonal: longest first
    level_window: float = 3600.0
    max_level_ratio: float | None = None  # seasonal: the level ratio is capped at this (None: not capped)
    window: float = 0.0
    resolution: float = 60.0
    fallback: bool = False  # `fallback: present`: no history -> the present value
    past_seasons: int = 1  # seasonal: the last k seasons at the same phase, combined
    combine: Literal["mean", "median", "max", "quantile"] = "mean"  # how past seasons are combined
    envelope: Literal["last", "mean", "max", "quantile"] = "last"  # over [phase, phase + horizon] one season ago
    quantile: float = 0.9  # of combine: quantile and envelope: quantile
    margin: float = 1.0  # the seasonal forecast is multiplied by it

    @property
    def season(self) -> float:
        """The longest season (seasonal), 0 for linear."""
        return self.seasons[0] if self.seasons else 0.0


@dataclass(frozen=True)
class DiscoveryRule:
    path: str  # e.g. "rules[0]", for error messages
    series_query: str
    metrics_query: str
    series_filters: tuple[RegexFilter, ...] = ()
    resources: ResourceMapping = ResourceMapping()
    name: NameMapping = NameMapping()
    namespaced: bool | None = None  # external rules: add the namespace matcher (default true)
    forecast: Forecast | None = None


@dataclass(frozen=True)
class RulesConfig:
    rules: tuple[DiscoveryRule, ...] = ()
    external_rules: tuple[DiscoveryRule, ...] = ()
    resource_rules: Mapping[str, Any] | None = None


def _str(value: Any, where: str, required: bool = False) -> str:
    if value is None:
        if required:
            raise RuleError(f"{where}: required field is missing")
        return ""
    if not isinstance(value, str):
        raise RuleError(f"{where}: must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise RuleError(f"{where}: must not be empty")
    return value


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RuleError(f"{where}: must be a mapping, got {type(value).__name__}")
    return value


def _warn_unknown(obj: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in obj:
        if key not in known:
            log.warning("%s.%s: unknown field ignored", where, key)


def _bool(value: Any, where: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise RuleError(f"{where}: must be true or false")
    return value


def _duration(value: Any, where: str, default: float | None = None) -> float:
    """A positive duration (`5m`, `1d`); `default` when absent, else required."""
    if value is None:
        if default is None:
            raise RuleError(f"{where}: required field is missing")
        return default
    try:
        seconds = parse_duration(value) if isinstance(value, (str, int, float)) else None
    except DurationError:
        seconds = None
    if seconds is None or seconds <= 0:
        raise RuleError(f"{where}: must be a positive duration such as 5m or 1d, got {value!r}")
    if round(seconds * 1000) != seconds * 1000:
        raise RuleError(f"{where}: must be a whole number of milliseconds, got {value!r}")
    return seconds


def _seasons(raw: Mapping[str, Any], where: str) -> tuple[float, ...]:
    """`season: 1d` or `seasons: [7d, 1d]` (one of the two), longest first, no repeats."""
    if "season" in raw and "seasons" in raw:
        raise RuleError(f"{where}.seasons: give season or seasons, not both")
    if "seasons" not in raw:
        return (_duration(raw.get("season"), f"{where}.season"),)
    listed = raw["seasons"]
    if not isinstance(listed, list) or not listed:
        raise RuleError(f"{where}.seasons: must be a non-empty list of durations such as [7d, 1d]")
    seasons = [_duration(v, f"{where}.seasons[{i}]") for i, v in enumerate(listed)]
    if len(set(seasons)) != len(seasons):
        raise RuleError(f"{where}.seasons: lists a season twice")
    return tuple(sorted(seasons, reverse=True))


def _number(value: Any, where: str, low: float, high: float | None, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            low < value and (high is None or value < high)):
        raise RuleError(f"{where}: must be {what}, got {value!r}")
    return float(value)


def _past_seasons(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 12:
        raise RuleError(f"{where}: must be a whole number from 1 to 12, got {value!r}")
    return value


def _one_of(*choices: str) -> Callable[[Any, str], str]:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
            raise RuleError(f"{where}: must be {listed}, got {value!r}")
        return str(value)
    return check


def _level_ratio(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        raise RuleError(f"{where}: must be a number of at least 1, got {value!r}")
    return float(value)


# A seasonal forecast's options (rules-file key -> the `Forecast` field and its check of one value):
# the rule's fields beside what it forecasts (method, horizon, seasons, resolution), which `tune`
# also tries on a rule's forecast (its shapes, `forecast_options`).
_SEASONAL_OPTIONS: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
    "levelWindow": ("level_window", _duration),
    "maxLevelRatio": ("max_level_ratio", _level_ratio),
    "pastSeasons": ("past_seasons", _past_seasons),
    "combine": ("combine", _one_of("mean", "median", "max", "quantile")),
    "envelope": ("envelope", _one_of("last", "mean", "max", "quantile")),
    "quantile": ("quantile", lambda v, w: _number(v, w, 0, 1, "a number between 0 and 1 (exclusive)")),
    "margin": ("margin", lambda v, w: _number(v, w, 0, None, "a positive number")),
}


_FORECAST_FIELDS = {
    "seasonal": {"name", "method", "horizon", "season", "seasons", "resolution", "fallback", *_SEASONAL_OPTIONS},
    "linear": {"name", "method", "horizon", "window", "resolution", "fallback"},
}


def _options(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The seasonal options `raw` gives, as `Forecast` fields (absent or null: its defaults)."""
    out = {_SEASONAL_OPTIONS[k][0]: _SEASONAL_OPTIONS[k][1](v, f"{where}.{k}")
           for k, v in raw.items() if k in _SEASONAL_OPTIONS and v is not None}
    if "quantile" in out and "quantile" not in (out.get("combine"), out.get("envelope")):
        raise RuleError(f"{where}.quantile: applies to combine: quantile or envelope: quantile")
    return out


def forecast_options(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, object], ...]:
    """Seasonal options given apart from a rule (rules-file keys, such as tune's shapes), as
    `Forecast` fields in the order given, each checked as the rules file checks it: one parser."""
    for key in raw:
        if key not in _SEASONAL_OPTIONS:
            raise RuleError(f"{where}.{key}: not an option of a seasonal forecast "
                            f"({', '.join(_SEASONAL_OPTIONS)})")
    return tuple(_options(raw, where).items())


def seasonal_misfit(f: Forecast) -> str | None:
    """Why a seasonal forecast's options do not fit its horizon and resolution (None: they fit):
    checked where the rules file is read and where `tune` applies its shapes to a rule."""
    if f.level_window < f.resolution:
        return f"{f.path}.levelWindow: must be at least the resolution ({f.resolution:g}s)"
    if f.envelope != "last" and f.horizon < f.resolution:
        return f"{f.path}.envelope: needs a horizon of at least the resolution ({f.resolution:g}s)"
    return None


def _forecast(raw: Any, where: str) -> Forecast | None:
    if raw is None:
        return None
    raw = _map(raw, where)
    method = _str(raw.get("method"), f"{where}.method", required=True)
    if method not in _FORECAST_FIELDS:
        raise RuleError(f"{where}.method: must be seasonal or linear, got {method!r}")
    for key in raw:
        if key not in _FORECAST_FIELDS[method]:
            other = next((m for m, keys in _FORECAST_FIELDS.items() if key in keys), None)
            why = f"applies to method {other}, not {method}" if other else "unknown field"
            raise RuleError(f"{where}.{key}: {why}")
    horizon = _duration(raw.get("horizon"), f"{where}.horizon")
    resolution = _duration(raw.get("resolution"), f"{where}.resolution", 60.0)
    name = _str(raw.get("name"), f"{where}.name")
    fallback = _str(raw.get("fallback"), f"{where}.fallback") or "none"
    if fallback not in ("none", "present"):
        raise RuleError(f"{where}.fallback: must be none or present, got {fallback!r}")
    if method == "seasonal":
        seasons = _seasons(raw, where)
        options = _options(raw, where)
        for i, season in enumerate(seasons):
            field = f"{where}.season" if "season" in raw else f"{where}.seasons[{i}]"
            if season <= horizon:
                raise RuleError(f"{field}: must be longer than the horizon ({raw.get('horizon')})")
        forecast = Forecast(where, "seasonal", horizon, name, seasons=seasons, resolution=resolution,
                            fallback=fallback == "present", **options)
        if (problem := seasonal_misfit(forecast)) is not None:
            raise RuleError(problem)
        return forecast
    window = _duration(raw.get("window"), f"{where}.window")
    if window < 2 * resolution:
        raise RuleError(f"{where}.window: must be at least twice the resolution ({resolution:g}s) to fit a trend")
    return Forecast(where, "linear", horizon, name, window=window, resolution=resolution,
                    fallback=fallback == "present")


def _rule(raw: Any, where: str) -> DiscoveryRule:
    if not isinstance(raw, Mapping):
        raise RuleError(f"{where}: must be a mapping with seriesQuery and metricsQuery")
    _warn_unknown(raw, {"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery", "namespaced",
                       "forecast"}, where)
    filters = []
    raw_filters = raw.get("seriesFilters") or []
    if not isinstance(raw_filters, list):
        raise RuleError(f"{where}.seriesFilters: must be a list")
    for i, f in enumerate(raw_filters):
        fw = f"{where}.seriesFilters[{i}]"
        f = _map(f, fw)
        _warn_unknown(f, {"is", "isNot"}, fw)
        is_, is_not = _str(f.get("is"), fw + ".is"), _str(f.get("isNot"), fw + ".isNot")
        if bool(is_) == bool(is_not):
            raise RuleError(f"{fw}: needs exactly one of 'is' or 'isNot'")
        filters.append(RegexFilter(is_, is_not))
    res = _map(raw.get("resources"), f"{where}.resources")
    _warn_unknown(res, {"template", "overrides", "namespaced"}, f"{where}.resources")
    overrides: dict[str, GroupResource] = {}
    for label, gr in _map(res.get("overrides"), f"{where}.resources.overrides").items():
        ow = f"{where}.resources.overrides.{label}"
        gr = _map(gr, ow)
        overrides[str(label)] = GroupResource(_str(gr.get("group"), ow + ".group"),
                                              _str(gr.get("resource"), ow + ".resource", required=True))
    name = _map(raw.get("name"), f"{where}.name")
    _warn_unknown(name, {"matches", "as"}, f"{where}.name")
    res_namespaced = _bool(res.get("namespaced"), f"{where}.resources.namespaced")
    top_namespaced = _bool(raw.get("namespaced"), f"{where}.namespaced")
    return DiscoveryRule(
        path=where,
        series_query=_str(raw.get("seriesQuery"), f"{where}.seriesQuery", required=True),
        metrics_query=_str(raw.get("metricsQuery"), f"{where}.metricsQuery", required=True),
        series_filters=tuple(filters),
        resources=ResourceMapping(_str(res.get("template"), f"{where}.resources.template"), overrides,
                                  res_namespaced),
        name=NameMapping(_str(name.get("matches"), f"{where}.name.matches"), _str(name.get("as"), f"{where}.name.as")),
        namespaced=top_namespaced if top_namespaced is not None else res_namespaced,
        forecast=_forecast(raw.get("forecast"), f"{where}.forecast"),
    )


def parse_rules(text: str, source: str = "rules file") -> RulesConfig:
    """Parse the YAML text of a rules file (shape only)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RuleError(f"{source}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise RuleError(f"{source}: must be a mapping with rules and/or externalRules")
    _warn_unknown(doc, {"rules", "externalRules", "resourceRules"}, source)
    out: dict[str, list[DiscoveryRule]] = {}
    for key in ("rules", "externalRules"):
        raw = doc.get(key) or []
        if not isinstance(raw, list):
            raise RuleError(f"{key}: must be a list")
        out[key] = [_rule(r, f"{key}[{i}]") for i, r in enumerate(raw)]
    resource_rules = doc.get("resourceRules")
    if resource_rules is not None and not isinstance(resource_rules, Mapping):
        raise RuleError("resourceRules: must be a mapping")
    return RulesConfig(tuple(out["rules"]), tuple(out["externalRules"]), resource_rules)


def load_rules(path: str | Path) -> RulesConfig:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise RuleError(f"cannot read rules file {path}: {exc.strerror or exc}") from None
    return parse_rules(text, str(path))
