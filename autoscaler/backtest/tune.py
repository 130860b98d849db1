"""The search behind `tune`: candidate specs made from the given one, each replayed over history,
scored on what pods went through, and chosen on one part of the range, checked on the other.

- Knobs (`Knobs`): the target of the first metric (and of every metric listed with the same target,
  such as its forecast), the tolerance (`behavior.scale{Up,Down}.tolerance`), the scale-down
  stabilization window, the scale-down and scale-up policies, and a forecast rule's horizon,
  seasons (those the history before the window covers) and shape against noise (`SHAPES`: past
  seasons combined, an envelope of the horizon) when the spec lists a forecast metric. A
  grid in two stages, so that it states plainly what was tried: (1) every target x scale-down
  window x scale-down policy, which set the replica-hours; (1b) when the first metric's rule
  declares a forecast the spec does not list, the forecast added at the same target: every
  target x (horizon x seasons, and seasons x shape), with the best scale-down settings of (1); (2)
  around the three best so far, every scale-up policy x tolerance (x horizon x seasons x shape),
  which set how fast a rise is met. Every point is cheap (`fastreplay`).
- Score (`Score`): replica-hours, seconds under-provisioned against ONE reference (the given spec's
  target unless stated; a candidate that raises its own target is charged for the load it leaves
  above the reference), scale events.
- Objective: the fewest replica-hours with the seconds under-provisioned within the budget
  (ties: fewer scale events); when no candidate is within it, the least under-provisioned. tune
  passes a slack (`choose`): within 2% of the cheapest, the least under-provisioned, so the choice
  does not sit on the budget's edge for the last percent of replica-hours.
- Over-fitting: candidates are chosen on the first part of the range only; the chosen one and the
  given spec are then replayed over the whole range and reported on the part not used to choose.
  A choice that breaks the budget there, or saves nothing there, is not recommended.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from promscaler.quantity import format_milli, to_milli

from .exposure import Reference, exposure, load_per_pod
from .replay import Replay

__all__ = ["DOWN_POLICIES", "SHAPES", "UP_POLICIES", "Knobs", "Score", "apply", "changed", "choose", "evaluate",
           "forecast_side", "knobs_of", "scale_down_side", "scale_up_side", "score"]

# Scale-up and scale-down policies tried, by name ("given": the spec's own).
UP_POLICIES: dict[str, dict[str, Any] | None] = {
    "given": None,
    "8 pods or 200% per 15s": {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 8, "periodSeconds": 15},
                                                                   {"type": "Percent", "value": 200,
                                                                    "periodSeconds": 15}]},
}
DOWN_POLICIES: dict[str, dict[str, Any] | None] = {
    "given": None,
    "100% per 15s": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
    "20% per 60s": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 20, "periodSeconds": 60}]},
}
TARGET_FRACTIONS = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)   # of the reference target
DOWN_WINDOWS = (0, 60, 180, 300, 600)                        # seconds, plus the given one
TOLERANCES = (0.05, 0.1, 0.2)                                # but the given one; plus the given one
# A seasonal forecast's shapes against noise tried (rules-file fields), at the rule's horizon: each
# costs one range query per season set. The mean of the horizon one season ago smooths a burst that
# fell on one instant, its upper quartile covers most of them; the median of the last 3 seasons
# keeps one noisy season from steering.
SHAPES: dict[str, dict[str, Any]] = {
    "envelope mean": {"envelope": "mean"},
    "median of 3, envelope mean": {"pastSeasons": 3, "combine": "median", "envelope": "mean"},
    "median of 3, envelope q0.75": {"pastSeasons": 3, "combine": "median", "envelope": "quantile", "quantile": 0.75},
}


@dataclass(frozen=True)
class Knobs:
    target: str                    # a quantity, as written in the spec
    tolerance: float | None        # None: the given spec's (or the cluster's)
    down_window: int | None        # None: the given spec's (or the cluster's)
    down_policy: str
    up_policy: str
    horizon: str | None = None     # the forecast's horizon (None: the rule's), when there is a forecast
    forecast: bool = False         # the first metric's forecast added, at the same target
    seasons: str | None = None     # the seasonal forecast's seasons ("7d,1d"; None: the rule's)
    shape: str | None = None       # a key of SHAPES (None: the rule's), at the rule's horizon

    def row(self) -> dict[str, Any]:
        return {"target": self.target, "tolerance": self.tolerance, "scaleDownWindowSeconds": self.down_window,
                "scaleDownPolicy": self.down_policy, "scaleUpPolicy": self.up_policy, "forecastHorizon": self.horizon,
                "addForecast": self.forecast, "forecastSeasons": self.seasons, "forecastShape": self.shape}


def _target_block(metric: dict[str, Any]) -> dict[str, Any]:
    kind = metric.get("type")
    source = metric.get({"Pods": "pods", "External": "external", "Object": "object", "Resource": "resource",
                         "ContainerResource": "containerResource"}.get(str(kind), ""), {})
    return source.get("target", {})


def _target_text(target: dict[str, Any]) -> str | None:
    for key in ("averageValue", "value"):
        if key in target:
            return str(target[key])
    return None


def knobs_of(raw: dict[str, Any], default_down_window: int, horizon: str | None = None) -> Knobs:
    """The given spec's own settings, as knobs."""
    spec = raw.get("spec") or {}
    target = _target_text(_target_block((spec.get("metrics") or [{}])[0])) or ""
    down = ((spec.get("behavior") or {}).get("scaleDown") or {})
    window = down.get("stabilizationWindowSeconds")
    return Knobs(target, None, int(window) if window is not None else None, "given", "given", horizon)


def _source_key(metric: dict[str, Any]) -> str:
    return {"Pods": "pods", "External": "external", "Object": "object"}.get(str(metric.get("type")), "")


def apply(raw: dict[str, Any], knobs: Knobs, forecast_metric: str | None = None) -> dict[str, Any]:
    """The given spec (a whole HorizontalPodAutoscaler/HorizontalAutoscaler document) with these
    knobs; `forecast_metric` is the name of the first metric's forecast (for `knobs.forecast`)."""
    out = copy.deepcopy(raw)
    spec = out["spec"]
    metrics = spec["metrics"]
    first = _target_block(metrics[0])
    first_text = _target_text(first)
    for metric in metrics:
        block = _target_block(metric)
        text = _target_text(block)
        if text is not None and first_text is not None and to_milli(text) == to_milli(first_text) \
                and block.get("type") == first.get("type"):
            block["averageValue" if "averageValue" in block else "value"] = knobs.target
    if knobs.forecast and forecast_metric:
        added = copy.deepcopy(metrics[0])
        added[_source_key(added)]["metric"]["name"] = forecast_metric
        metrics.append(added)
    behavior = spec.get("behavior")
    changes = (knobs.tolerance is not None or knobs.down_window is not None or knobs.down_policy != "given"
               or knobs.up_policy != "given")
    if changes:
        behavior = spec.setdefault("behavior", {})
        up = behavior.setdefault("scaleUp", {})
        down = behavior.setdefault("scaleDown", {})
        if knobs.up_policy != "given":
            up.update(copy.deepcopy(UP_POLICIES[knobs.up_policy]) or {})
        if knobs.down_policy != "given":
            down.update(copy.deepcopy(DOWN_POLICIES[knobs.down_policy]) or {})
        if knobs.down_window is not None:
            down["stabilizationWindowSeconds"] = knobs.down_window
        if knobs.tolerance is not None:
            up["tolerance"] = down["tolerance"] = knobs.tolerance
        for key in ("scaleUp", "scaleDown"):
            if not behavior[key]:
                del behavior[key]
    return out


def scale_down_side(given: Knobs, reference_target: float) -> list[Knobs]:
    """Stage 1: every target x scale-down window x scale-down policy, the rest as given (given first)."""
    targets = [format_milli(max(1, round(reference_target * f * 1000))) for f in TARGET_FRACTIONS]
    if given.target and given.target not in targets:
        targets.append(given.target)
    windows: list[int | None] = [None, *(w for w in DOWN_WINDOWS if w != given.down_window)]
    out = [given]
    for t, w, down in itertools.product(targets, windows, DOWN_POLICIES):
        k = Knobs(t, None, w, down, "given", given.horizon)
        if k != given:
            out.append(k)
    return out


def _forecast_settings(horizons: Sequence[str | None], seasons: Sequence[str | None],
                       shapes: Sequence[str | None]) -> list[tuple[str | None, str | None, str | None]]:
    """(horizon, seasons, shape), the first of each first: every horizon x seasons at the rule's
    shape (unless the first shape is another), then every seasons x shape at the rule's horizon
    (a shape is fetched at the rule's horizon only)."""
    out: list[tuple[str | None, str | None, str | None]] = \
        [(h, p, None) for h, p in itertools.product(horizons, seasons)] if shapes[0] is None else []
    out += [(None, p, sh) for p, sh in itertools.product(seasons, shapes)]
    return list(dict.fromkeys(out))


def forecast_side(best: Knobs, given: Knobs, reference_target: float, horizons: Sequence[str],
                  seasons: Sequence[str] = (), shapes: Sequence[str] = ()) -> list[Knobs]:
    """Stage 1b, when the first metric's rule declares a forecast the spec does not list: with it
    added, every target x horizon x seasons (x shape), with the best scale-down settings of stage 1."""
    targets = [format_milli(max(1, round(reference_target * f * 1000))) for f in TARGET_FRACTIONS]
    if given.target and given.target not in targets:
        targets.append(given.target)
    return [Knobs(t, None, best.down_window, best.down_policy, "given", h, True, p, sh)
            for t in targets for h, p, sh in _forecast_settings([None, *horizons], [None, *seasons], [None, *shapes])]


def _around(value: str | None, others: Sequence[str]) -> list[str | None]:
    return [value, *(o for o in others if o != value)]


def scale_up_side(best: Sequence[Knobs], given_tolerance: float, horizons: Sequence[str] = (),
                  listed_forecast: bool = False, seasons: Sequence[str] = (),
                  shapes: Sequence[str] = ()) -> list[Knobs]:
    """Stage 2: around each of the best so far, every scale-up policy x tolerance (x forecast
    horizon x seasons x shape, with a forecast listed or added), excluding what was already tried."""
    tolerances: list[float | None] = [None, *(t for t in TOLERANCES if t != given_tolerance)]
    out: list[Knobs] = []
    for b in best:
        varied = listed_forecast or b.forecast
        settings = _forecast_settings(_around(b.horizon, horizons), _around(b.seasons, seasons),
                                      _around(b.shape, shapes)) if varied else [(b.horizon, b.seasons, b.shape)]
        for up, tol, (h, p, sh) in itertools.product(UP_POLICIES, tolerances, settings):
            k = Knobs(b.target, tol, b.down_window, b.down_policy, up, h, b.forecast, p, sh)
            if k not in best and k not in out:
                out.append(k)
    return out


@dataclass(frozen=True)
class Score:
    replica_hours: float
    seconds_under: float          # against the reference
    scale_events: int
    ideal_replica_hours: float    # the observed load / the reference target, integrated

    def row(self) -> dict[str, Any]:
        return {"replicaHours": round(self.replica_hours, 3), "secondsUnderProvisioned": self.seconds_under,
                "scaleEvents": self.scale_events, "idealReplicaHours": round(self.ideal_replica_hours, 3)}


def score(result: Replay, query: Any, observed: np.ndarray, reference: Reference, part: slice) -> Score:
    """A replay's figures over one part of its range."""
    step = result.grid.step
    ready = result.ready[part]
    load = load_per_pod(query, observed[part], ready)
    events = sum(1 for e in result.events if part.start <= e.index < (part.stop or result.grid.count))
    ideal = float(np.nansum(observed[part])) / reference.target * step / 3600.0
    return Score(float(result.replicas[part].sum()) * step / 3600.0,
                 exposure(load, reference, step).seconds, events, ideal)


def changed(k: Knobs, given: Knobs) -> int:
    """How many knobs differ from the given spec's."""
    return sum(a != b for a, b in zip(k.row().values(), given.row().values(), strict=True))


def choose(scores: Iterable[tuple[Knobs, Score]], budget_seconds: float, given: Knobs,
           slack: float = 0.0) -> list[tuple[Knobs, Score]]:
    """Best first: within the budget by replica-hours, then scale events, then the fewest knobs
    changed (equal replays: the smallest change); then the rest by the seconds under-provisioned.

    With `slack`, the candidates within the budget and within that share of the cheapest one's
    replica-hours come first, the least under-provisioned of them first: a spec's replica-hours
    hold from one period to the next far better than its seconds under-provisioned do (on bursty
    traffic a few steps more or less), so paying a little of the first buys room in the second."""
    def key(item: tuple[Knobs, Score]) -> tuple[int, float, float, int, int]:
        k, s = item
        if s.seconds_under <= budget_seconds:
            return (0, round(s.replica_hours, 9), 0.0, s.scale_events, changed(k, given))
        return (1, s.seconds_under, round(s.replica_hours, 9), s.scale_events, changed(k, given))
    ranked = sorted(scores, key=key)
    if slack <= 0 or not ranked or ranked[0][1].seconds_under > budget_seconds:
        return ranked
    ceiling = ranked[0][1].replica_hours * (1 + slack)
    near = [item for item in ranked if item[1].seconds_under <= budget_seconds and item[1].replica_hours <= ceiling]
    return sorted(near, key=lambda item: (item[1].seconds_under, *key(item)[1:])) + ranked[len(near):]


def evaluate(candidates: Sequence[Knobs], run: Callable[[Knobs], Score], workers: int = 1) -> list[tuple[Knobs, Score]]:
    """Each candidate's score; with `workers` > 1 in forked processes (the history is shared, not copied)."""
    if workers <= 1:
        return [(k, run(k)) for k in candidates]
    import multiprocessing

    global _RUN
    _RUN = run
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        scores = pool.map(_run_one, candidates, chunksize=max(1, len(candidates) // (workers * 4)))
    return list(zip(candidates, scores, strict=True))


_RUN: Callable[[Knobs], Score] | None = None


def _run_one(k: Knobs) -> Score:
    assert _RUN is not None
    return _RUN(k)
