"""Scenario files -> validated `DecisionInput`s, with a field path in every error (exit status 2).

A scenario is checked field by field first (`schema`: unknown fields are errors, as with
`kubectl apply --validate=strict`). Its short forms -- pods by count (`pods: {count: 3, ready: 2,
cpuRequest: 500m}`), metric values keyed by the spec metric's name (a list with one value per pod,
or one value) -- are expanded to the full objects (Pods, PodMetrics, MetricValues) before they are
read, so both forms take one path. The file's metric items stand in for the metrics APIs: which
items answer which spec metric follows how the live controller asks those APIs.
The format is docs/autoscaler.md's ("The scenario file").
"""

from __future__ import annotations

import functools
import gc
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TextIO, TypeVar

import yaml

from promscaler.quantity import QuantityError, parse_quantity
from promscaler.selectors import Operator, Selector, SelectorError, parse_selector

from ..decision import ControllerConfig, DecisionInput, History, MetricFailure, Reading, Recommendation, ScaleEvent
from ..decision.clock import before
from ..decision.controls import failures_so_far, parse_pause
from ..decision.fields import MAX_INT32, duration, integer, items, obj, quantity
from ..decision.keda import is_scaled_object, read_scaled_object
from ..decision.kubeversion import CURRENT, KubeVersion, supported_version
from ..decision.model import Condition, SelectorOverlap
from ..decision.overlap import overlap
from ..decision.spec import METRIC_TYPES, HPASpec, MetricSpec, SpecError, admit, parse_spec
from ..objects import (
    ObjectError,
    custom_value,
    external_metric_reading,
    object_metric_reading,
    pod_info,
    pod_labels,
    pod_metrics_reading,
    pods_metric_reading,
    sample_time,
    scale_selector,
)
from . import schema
from .schema import SchemaError

__all__ = [
    "Scenario", "ScenarioError", "build_scenario", "expand_metric_values", "expand_pods", "load_scenarios", "paused_gc",
]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 20x faster on large files
_MAX_SHORT_PODS = 100_000
_MAX_NESTING = 10_000  # libyaml's composer recurses in C: far deeper input (200,000 levels) overflows its stack
_BRACKETS = re.compile(r"[\[\]{}]")
_COMPACT = re.compile(rf"(?:[-?][ \t]+){{{_MAX_NESTING}}}")  # "- - - x": nesting without indentation
_API_NAMES = {"Resource": "resource metrics API", "ContainerResource": "resource metrics API",
              "Pods": "custom metrics API", "Object": "custom metrics API", "External": "external metrics API"}


_P = ParamSpec("_P")
_R = TypeVar("_R")


class ScenarioError(ValueError):
    """An invalid scenario: `path: reason`."""


def _scenario_errors(read: Callable[_P, _R]) -> Callable[_P, _R]:
    """A reader of scenario input whose fields decision/fields.py checks: their SpecError (already
    `path: reason`) is raised as a ScenarioError, the one error of this module's callers."""
    @functools.wraps(read)
    def reader(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return read(*args, **kwargs)
        except SpecError as exc:
            raise ScenarioError(str(exc)) from None
    return reader


@dataclass(frozen=True)
class Scenario:
    label: str                         # "file" or "file#2", plus the autoscaler's name
    input: DecisionInput
    expect: Mapping[str, Any] | None
    # hpa.status.conditions: the ones the sync does not set stay in the status (setCondition)
    conditions: tuple[Condition, ...] = ()


# --- loading -------------------------------------------------------------------------------------


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: loading and reading a large scenario creates millions
    of objects and no cycles, and the collector's repeated passes over them made loading a 20,000-pod
    file quadratic (18 s of CPU for what takes 5 s without them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _too_deep(text: str) -> bool:
    """Whether the text nests more than _MAX_NESTING levels (brackets in strings count too)."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        depth = depth + 1 if match.group() in "[{" else max(0, depth - 1)
        if depth > _MAX_NESTING:
            return True
    return _COMPACT.search(text) is not None


def load_scenarios(source: str, stdin: TextIO | None = None) -> list[tuple[str, Any]]:
    """(label, document) for every YAML/JSON document of a file, or of stdin for `-`."""
    name = "<stdin>" if source == "-" else source
    try:
        if source == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(source, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{name}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if _too_deep(text):
        raise ScenarioError(f"{name}: not valid: nested deeper than {_MAX_NESTING} levels")
    try:
        with paused_gc():
            docs = [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{name}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ScenarioError(f"{name}: not valid YAML: nested too deeply") from None
    except ValueError as exc:  # the constructors' own errors (a timestamp out of range, ...)
        raise ScenarioError(f"{name}: not valid YAML: {exc}") from None
    if not docs:
        raise ScenarioError(f"{name}: no scenario in the file")
    if len(docs) == 1:
        return [(name, docs[0])]
    return [(f"{name}#{i + 1}", d) for i, d in enumerate(docs)]


def _err(path: str, reason: str) -> ScenarioError:
    return ScenarioError(f"{path}: {reason}")


def _map(doc: Mapping[str, Any], key: str, path: str, required: bool = False) -> Mapping[str, Any]:
    return obj(doc.get(key), path, required) or {}


def _list(doc: Mapping[str, Any], key: str, path: str) -> list[Any]:
    return items(doc.get(key), path)


def _int(value: Any, path: str, maximum: int = MAX_INT32) -> int:
    """A count: an int32 (or up to `maximum`) from 0."""
    return integer(value, path, 0, maximum)


_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


def _time(value: Any, path: str) -> datetime:
    """A scenario's time: RFC 3339, from 1970 on (year 1, Go's zero time, is no time to decide at)."""
    try:
        t = sample_time(value, path)
    except ObjectError as exc:
        raise _err(path, exc.reason) from None
    if t is None:
        raise _err(path, f"not an RFC 3339 time: {value!r}")
    return t


def _quantity(value: Any, path: str) -> Any:
    """A quantity, checked and kept as written (the objects it goes into hold it so)."""
    quantity(value, path)
    return value


def _kube_version(doc: Mapping[str, Any], default: KubeVersion) -> KubeVersion:
    """`kubernetesVersion`: the release the decision follows ("1.36", "v1.37.2"); else `default`."""
    value = doc.get("kubernetesVersion")
    if value is None:
        return default
    try:
        return supported_version(str(value))
    except ValueError as exc:
        raise _err("kubernetesVersion", str(exc)) from None


def _config(doc: Mapping[str, Any], kube_version: KubeVersion) -> ControllerConfig:
    raw = _map(doc, "config", "config")
    base = ControllerConfig()
    tolerance = base.tolerance
    if raw.get("tolerance") is not None:
        try:
            tolerance = float(parse_quantity(raw["tolerance"]))
        except QuantityError:
            raise _err("config.tolerance", f"not a number: {raw['tolerance']!r}") from None
        if not 0 <= tolerance < float("inf"):
            raise _err("config.tolerance", "must be a finite number, not negative")

    def dur(key: str, default: float) -> float:
        return default if raw.get(key) is None else duration(raw[key], f"config.{key}")

    return ControllerConfig(
        tolerance=tolerance,
        cpu_initialization_period=dur("cpuInitializationPeriod", base.cpu_initialization_period),
        initial_readiness_delay=dur("initialReadinessDelay", base.initial_readiness_delay),
        downscale_stabilization_window=dur("downscaleStabilizationWindow", base.downscale_stabilization_window),
        kube_version=kube_version,
    )


def _history_entries(raw: Mapping[str, Any], key: str, count: str, make: Any) -> tuple[Any, ...]:
    """`history.<key>`: objects with a `timestamp` and an integer `<count>` field."""
    out = []
    for i, e in enumerate(_list(raw, key, f"history.{key}")):
        p = f"history.{key}[{i}]"
        for name in ("timestamp", count):
            if e.get(name) is None:
                raise _err(f"{p}.{name}", "required")
        out.append(make(_time(e["timestamp"], f"{p}.timestamp"), _int(e[count], f"{p}.{count}")))
    return tuple(out)


def _history(doc: Mapping[str, Any], spec: HPASpec, status: Mapping[str, Any]) -> History:
    """`history:`; the failed syncs so far from `history.failures`, else (as the controller after a
    restart) from the autoscaler's `status.metricFailures`."""
    raw = _map(doc, "history", "history")
    if raw.get("failures") is not None:
        failures = _int(raw["failures"], "history.failures")
    else:
        failures = failures_so_far(spec, status)
    # Absent recommendations mean a fresh controller; an explicit list, even empty, is used as is.
    recs = (_history_entries(raw, "recommendations", "replicas", Recommendation)
            if raw.get("recommendations") is not None else None)
    # A ScaledObject's status.lastActiveTime: when a trigger was last active (its cooldown counts from there).
    active = status.get("lastActiveTime")
    return History(recs, _history_entries(raw, "scaleUpEvents", "replicaChange", ScaleEvent),
                   _history_entries(raw, "scaleDownEvents", "replicaChange", ScaleEvent), failures,
                   None if active is None else _time(active, "hpa.status.lastActiveTime"))


def _expect(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if doc.get("expect") is None:
        return None
    expect = _map(doc, "expect", "expect")
    for key in ("currentMetrics", "proposals"):
        if key in expect and not isinstance(expect[key], list):
            raise _err(f"expect.{key}", "must be a list")
    return expect


def _wrap(prefix: str, exc: ObjectError) -> ScenarioError:
    sep = "" if exc.path.startswith("[") else "."
    return _err(f"{prefix}{sep}{exc.path}", exc.reason)


# --- the short forms, expanded to the full objects -----------------------------------------------


@_scenario_errors
def expand_pods(short: Mapping[str, Any], name: str, namespace: str, now: datetime) -> list[dict[str, Any]]:
    """`pods: {count: 3, ready: 2, cpuRequest: 500m, memoryRequest: 1Gi}` -> Pod objects `<name>-1`...
    with one container `app`: the first `ready` (default: all) Running and Ready for an hour, the
    others Running, started 10 s ago and not Ready yet (inside the CPU initialization period)."""
    count = _int(short.get("count"), "pods.count", maximum=_MAX_SHORT_PODS)
    ready = count if short.get("ready") is None else _int(short["ready"], "pods.ready", maximum=count)
    requests = {resource: _quantity(short[key], f"pods.{key}")
                for resource, key in (("cpu", "cpuRequest"), ("memory", "memoryRequest")) if short.get(key) is not None}
    hour_ago, just_started = before(now, timedelta(hours=1)), before(now, timedelta(seconds=10))
    pods = []
    for i in range(count):
        start = hour_ago if i < ready else just_started
        pods.append({
            "metadata": {"name": f"{name}-{i + 1}", "namespace": namespace},
            "spec": {"containers": [{"name": "app", "resources": {"requests": requests}}]},
            "status": {"phase": "Running", "startTime": start, "conditions": [
                {"type": "Ready", "status": "True" if i < ready else "False", "lastTransitionTime": start}]},
        })
    return pods


def _labels_for(selector: Mapping[str, Any] | None) -> dict[str, str]:
    """Labels that a metric's LabelSelector matches (for a value given in the short form)."""
    labels = dict((selector or {}).get("matchLabels") or {})
    for e in (selector or {}).get("matchExpressions") or []:
        if e.get("operator") == "In" and e.get("values"):
            labels[e["key"]] = e["values"][0]
        elif e.get("operator") == "Exists":
            labels[e["key"]] = "x"
    return labels


def _pod_values(value: Any, path: str, pods: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Any]]:
    """(pod, value) for a per-pod metric given as a list (one entry per pod, null for none) or one value."""
    if isinstance(value, list):
        if len(value) != len(pods):
            raise _err(path, f"{len(value)} values for {len(pods)} pods (one per pod, null for a pod without one)")
        pairs = list(zip(pods, value, strict=True))
    else:
        pairs = [(pod, value) for pod in pods]
    for i, (_, v) in enumerate(pairs):
        if v is not None:
            _quantity(v, f"{path}[{i}]" if isinstance(value, list) else path)
    return [(pod, v) for pod, v in pairs if v is not None]


def _resource_item(pod: Mapping[str, Any], ms: MetricSpec, value: Any, now: datetime) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    if ms.container:
        containers = [{"name": ms.container, "usage": {ms.name: value}}]
    else:  # the whole value on the first container, 0 on the others: the pod's sum is the value
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []] or ["app"]
        containers = [{"name": n, "usage": {ms.name: value if i == 0 else 0}} for i, n in enumerate(names)]
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}, "timestamp": now,
            "window": 30, "containers": containers}


@_scenario_errors
def expand_metric_values(ms: MetricSpec, value: Any, path: str, pods: Sequence[Mapping[str, Any]], namespace: str,
                         now: datetime) -> tuple[str, list[dict[str, Any]]]:
    """A metric's value in the short form -> (`metrics` list it belongs to, the items the metrics API
    would answer): per pod for Resource, ContainerResource and Pods; one total for Object; one
    series, or a list of series, for External."""
    if ms.type in ("Resource", "ContainerResource"):
        return "resource", [_resource_item(pod, ms, v, now) for pod, v in _pod_values(value, path, pods)]
    selector = {"selector": dict(ms.selector_raw)} if ms.selector_raw is not None else {}
    if ms.type == "Pods":
        return "custom", [{"describedObject": {"kind": "Pod", "name": (pod.get("metadata") or {}).get("name"),
                                               "namespace": namespace},
                           "metricName": ms.name, "timestamp": now, "value": v, **selector}
                          for pod, v in _pod_values(value, path, pods)]
    values = value if isinstance(value, list) and ms.type == "External" else [value]
    for i, v in enumerate(values):
        _quantity(v, f"{path}[{i}]" if values is value else path)
    if ms.type == "Object":
        ref = ms.described_object
        assert ref is not None
        described = {"kind": ref.kind, "name": ref.name, "namespace": namespace,
                     **({"apiVersion": ref.api_version} if ref.api_version else {})}
        return "custom", [{"describedObject": described, "metricName": ms.name, "timestamp": now, "value": value,
                           **selector}]
    labels = _labels_for(ms.selector_raw)
    return "external", [{"metricName": ms.name, "metricLabels": labels, "timestamp": now, "value": v} for v in values]


def _metrics_full(raw: Any, spec: HPASpec, pods: Sequence[Mapping[str, Any]], namespace: str,
                  now: datetime) -> dict[str, list[Any]]:
    """`metrics:` with its short-form entries (keyed by a spec metric's name) expanded."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise _err("metrics", f"must be an object, got {type(raw).__name__}")
    full: dict[str, list[Any]] = {key: [] for key in schema.METRICS_FULL_KEYS}
    by_name = {ms.name: ms for ms in reversed(spec.metrics)}  # the first spec metric of a name
    for key, value in raw.items():
        path = f"metrics.{key}"
        if key in schema.METRICS_FULL_KEYS:
            try:
                schema.check(value, schema.METRICS_FULL[key], path)
            except SchemaError as exc:
                raise ScenarioError(str(exc)) from None
            full[key].extend(value or [])
        elif isinstance(key, str) and key in by_name:
            target, items = expand_metric_values(by_name[key], value, path, pods, namespace, now)
            full[target].extend(items)
        else:
            raise _err(path, "unknown field (use resource, custom, external, failures, or the name of a metric "
                             "of hpa.spec.metrics with its values)")
    return full


# --- the metrics APIs, played by the file -----------------------------------------------------
# The live controller asks the APIs and takes what they answer; here the file's items stand in
# for the APIs' contents, so selecting what a request would return happens here, once.


def _same_selector(ms: MetricSpec, selector: Selector) -> bool:
    return (ms.selector or Selector()) == selector


def _core_version(api_version: Any) -> Any:
    """Core-group objects are written `v1` in specs and `/v1` in MetricValues: the same thing."""
    return "v1" if api_version == "/v1" else api_version


def _answer_pods(items: Sequence[Mapping[str, Any]], ms: MetricSpec) -> list[Mapping[str, Any]]:
    """`pods/*/<metric>?metricLabelSelector=`: Pod items with the spec's metric name and selector."""
    out = []
    for i, item in enumerate(items):
        described, name, selector, *_ = custom_value(item, f"[{i}]")
        if described.get("kind") == "Pod" and name == ms.name and _same_selector(ms, selector):
            out.append(item)
    return out


def _answer_object(items: Sequence[Mapping[str, Any]], ms: MetricSpec) -> list[Mapping[str, Any]]:
    """`<resource>/<name>/<metric>`: the described object's item (apiVersion compared when given)."""
    ref = ms.described_object
    assert ref is not None
    for i, item in enumerate(items):
        described, name, selector, *_ = custom_value(item, f"[{i}]")
        if described.get("kind") != ref.kind or described.get("name") != ref.name:
            continue
        given = described.get("apiVersion")
        if ref.api_version and given is not None and _core_version(given) != _core_version(ref.api_version):
            continue
        if name == ms.name and _same_selector(ms, selector):
            return [item]
    return []


def _string_map(value: Any, path: str) -> Mapping[str, str]:
    labels = value or {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ObjectError(path, "must map strings to strings")
    return labels


def _answer_external(items: Sequence[Mapping[str, Any]], ms: MetricSpec) -> list[Mapping[str, Any]]:
    """`<metric>?labelSelector=`: the series with the spec's name whose labels match its selector."""
    selector = ms.selector or Selector()
    out = []
    for i, item in enumerate(items):
        labels = _string_map(item.get("metricLabels"), f"[{i}].metricLabels")
        if item.get("metricName") == ms.name and selector.matches(labels):
            out.append(item)
    return out


def _failures(metrics: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    failures: dict[tuple[str, str], str] = {}
    for i, f in enumerate(metrics["failures"]):
        p = f"metrics.failures[{i}]"
        if f.get("type") not in METRIC_TYPES:
            raise _err(f"{p}.type", f"must be one of {', '.join(METRIC_TYPES)}")
        if not f.get("name"):
            raise _err(f"{p}.name", "required")
        message = f.get("message") or "the server is currently unable to handle the request"
        failures[(f["type"], str(f["name"]))] = str(message)
    return failures


def _reading(ms: MetricSpec, metrics: Mapping[str, list[Any]], pod_set: set[str], namespace: str | None) -> Reading:
    def in_namespace(obj: Any) -> bool:
        return namespace is None or (obj or {}).get("namespace") in (None, namespace)

    if ms.type in ("Resource", "ContainerResource"):
        mine = [it for it in metrics["resource"]
                if (it.get("metadata") or {}).get("name") in pod_set and in_namespace(it.get("metadata"))]
        return pod_metrics_reading(mine, ms.name, ms.container)
    if ms.type == "External":
        return external_metric_reading(_answer_external(metrics["external"], ms))
    mine = [it for it in metrics["custom"] if in_namespace(it.get("describedObject"))]
    if ms.type == "Pods":
        return pods_metric_reading(_answer_pods(mine, ms), ms.name, pod_set)
    ref = ms.described_object
    assert ref is not None
    return object_metric_reading(_answer_object(mine, ms), ms.name, ref.kind, ref.name)


def _readings(spec: HPASpec, metrics: Mapping[str, list[Any]], pods: Sequence[str],
              namespace: str | None) -> list[Reading]:
    failures = _failures(metrics)
    pod_set = set(pods)
    out: list[Reading] = []
    for ms in spec.metrics:
        failure = failures.get((ms.type, ms.name))
        if failure is not None:
            out.append(MetricFailure(f"unable to fetch metrics from {_API_NAMES[ms.type]}: {failure}"))
            continue
        try:
            out.append(_reading(ms, metrics, pod_set, namespace))
        except ObjectError as exc:
            key = {"Resource": "resource", "ContainerResource": "resource",
                   "External": "external"}.get(ms.type, "custom")
            raise _wrap(f"metrics.{key}", exc) from None
    return out


# --- the scenario ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    current: int
    status_replicas: int
    selector: Selector | None
    selector_error: str | None
    selector_text: str = ""  # status.selector as written (the AmbiguousSelector message quotes it)


def _scale_target(doc: Mapping[str, Any], short_pods: int | None) -> _Target:
    """The scale subresource: full (`spec.replicas`, `status.replicas`, `status.selector`) or short
    (`replicas: N`; left out with pods by count, it is that count)."""
    target = _map(doc, "scaleTarget", "scaleTarget", required=short_pods is None)
    tspec = _map(target, "spec", "scaleTarget.spec")
    if tspec.get("replicas") is not None:
        current = _int(tspec["replicas"], "scaleTarget.spec.replicas")
    elif target.get("replicas") is not None:
        current = _int(target["replicas"], "scaleTarget.replicas")
    elif short_pods is not None:
        current = short_pods
    else:
        raise _err("scaleTarget.spec.replicas", "required")
    tstatus = _map(target, "status", "scaleTarget.status")
    status_replicas = current
    if tstatus.get("replicas") is not None:
        status_replicas = _int(tstatus["replicas"], "scaleTarget.status.replicas")
    selector, selector_error = scale_selector(target)
    if selector_error and tstatus.get("selector"):
        raise _err("scaleTarget.status.selector", selector_error.split(": ", 1)[-1])
    if short_pods is not None and not tstatus.get("selector"):
        selector_error = None  # pods by count are the target's pods
    return _Target(current, status_replicas, selector, selector_error, str(tstatus.get("selector") or ""))


def _pods(doc: Mapping[str, Any], target: _Target, namespace: str | None,
          short: bool) -> tuple[list[Any], list[Any], list[Mapping[str, str]]]:
    """(every Pod object of the scenario, the PodInfos of those the target's selector selects,
    their labels)."""
    raw_pods = doc.get("pods") or []
    selected, selected_labels = [], []
    for i, raw in enumerate(raw_pods):
        try:
            info = pod_info(raw)
            labels = pod_labels(raw)
        except ObjectError as exc:
            raise _wrap(f"pods[{i}]", exc) from None
        times = (("startTime", info.start_time), ("conditions[Ready].lastTransitionTime", info.ready_transition))
        for field, t in times:
            if t is not None and t < _EARLIEST:
                raise _err(f"pods[{i}].status.{field}", "out of range (before 1970)")
        pod_ns = (raw.get("metadata") or {}).get("namespace")
        if namespace is not None and pod_ns not in (None, namespace):
            continue
        if short or (target.selector is not None and target.selector.matches(labels)):
            selected.append(info)
            selected_labels.append(_carried(target.selector) if short else labels)
    return raw_pods, selected, selected_labels


def _carried(selector: Selector | None) -> dict[str, str]:
    """The labels a pod of the short form carries: a value for each key the target's selector
    requires (the first of an `in`), so that the selector selects it."""
    wants = (Operator.EQUALS, Operator.IN, Operator.EXISTS)
    return {r.key: r.values[0] if r.values else "x" for r in (selector.requirements if selector else ())
            if r.operator in wants}


def _overlap(doc: Mapping[str, Any], me: str, namespace: str, target: _Target,
             labels: list[Mapping[str, str]]) -> SelectorOverlap | None:
    """`otherAutoscalers`: the other autoscalers of the namespace with their targets' selectors, what
    the controller's selector store holds; with this one, those selecting some of its pods."""
    others = _list(doc, "otherAutoscalers", "otherAutoscalers")
    if not others:
        return None
    if target.selector is None:
        raise _err("otherAutoscalers", "needs scaleTarget.status.selector: the pods they share are found by it")
    selectors = {me: target.selector}
    for i, item in enumerate(others):
        name, text = item.get("name"), item.get("selector")
        if not isinstance(name, str) or not name:
            raise _err(f"otherAutoscalers[{i}].name", "required: the autoscaler's name")
        key = f"{namespace}/{name}"
        if key in selectors:
            raise _err(f"otherAutoscalers[{i}].name", f"{name!r} is named twice (or is the hpa itself)")
        if not isinstance(text, str) or not text:
            raise _err(f"otherAutoscalers[{i}].selector", "required: its target's scale selector, e.g. app=web")
        try:
            selectors[key] = parse_selector(text)
        except SelectorError as exc:
            raise _err(f"otherAutoscalers[{i}].selector", str(exc)) from None
    return overlap(target.selector_text, labels, selectors)


@_scenario_errors
def build_scenario(label: str, doc: Any, default_now: datetime | None = None,
                   kube_version: KubeVersion = CURRENT) -> Scenario:
    """Validate one scenario document and turn it into the decision's input; `kube_version` is the
    release decided as when the scenario names none (`kubernetesVersion`)."""
    if not isinstance(doc, Mapping):
        raise ScenarioError("scenario: must be an object with hpa, scaleTarget, pods, metrics")
    keda = is_scaled_object(doc.get("hpa"))  # a ScaledObject: decision/keda.py checks its fields
    try:
        schema.check(doc, {**schema.TOP, "hpa": schema.ANY} if keda else schema.TOP, "")
    except SchemaError as exc:
        raise ScenarioError(str(exc)) from None
    now = _time(doc["now"], "now") if doc.get("now") is not None else (default_now or datetime.now(UTC))
    config = _config(doc, _kube_version(doc, kube_version))
    hpa = _map(doc, "hpa", "hpa", required=True)
    api_version = hpa.get("apiVersion")
    if isinstance(api_version, str) and api_version.startswith("autoscaling/") and api_version != "autoscaling/v2":
        raise _err("hpa.apiVersion", f"{api_version} is not supported: use autoscaling/v2")
    meta = _map(hpa, "metadata", "hpa.metadata")
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    try:
        if keda:
            so = read_scaled_object(hpa)
            spec, paused = so.spec, so.pause
        else:
            spec = parse_spec(hpa.get("spec"), "hpa.spec")
            admit(spec, hpa.get("kind"), config.kube_version, "hpa.spec")
            paused = parse_pause(hpa.get("kind"), meta.get("annotations"))
    except SpecError as exc:
        if keda or exc.path.startswith("metadata."):
            raise _err(f"hpa.{exc.path}", exc.reason) from None
        raise ScenarioError(str(exc)) from None
    status = _map(hpa, "status", "hpa.status")
    conditions = tuple(_condition(c) for c in _list(status, "conditions", "hpa.status.conditions")
                       if isinstance(c, Mapping))
    scaled_to_zero = any(c.type == "ScaledToZero" and c.status == "True" for c in conditions)
    short = isinstance(doc.get("pods"), Mapping)
    if short:
        doc = {**doc, "pods": expand_pods(doc["pods"], spec.scale_target_ref.name, namespace or "default", now)}
    target = _scale_target(doc, len(doc["pods"]) if short else None)
    raw_pods, pods, labels = _pods(doc, target, namespace, short)
    metrics = _metrics_full(doc.get("metrics"), spec, raw_pods, namespace or "default", now)
    readings = _readings(spec, metrics, [p.name for p in pods], namespace)
    name = meta.get("name")
    inp = DecisionInput(
        spec=spec, current_replicas=target.current, status_replicas=target.status_replicas, pods=tuple(pods),
        readings=tuple(readings), now=now, config=config, history=_history(doc, spec, status),
        scaled_to_zero=scaled_to_zero, selector_error=target.selector_error, paused=paused,
        namespace=namespace or "default", native=not keda and hpa.get("kind") != "HorizontalAutoscaler",
        overlap=_overlap(doc, f"{namespace or 'default'}/{name}", namespace or "default", target, labels),
    )
    return Scenario(f"{label} ({name})" if name else label, inp, _expect(doc), conditions)


def _condition(c: Mapping[str, Any]) -> Condition:
    status = c.get("status")
    return Condition(str(c.get("type", "")), status if status in ("True", "False") else "Unknown",
                     str(c.get("reason", "")), str(c.get("message", "")))
