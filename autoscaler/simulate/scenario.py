"""Scenario files -> validated `DecisionInput`s, with a field path in every error (exit status 2).

The matching rules are docs/simulate.md's: which custom, external and
resource items answer which spec metric, as the live controller asks the metrics APIs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

from promscaler.quantity import QuantityError, parse_quantity
from promscaler.times import DurationError, parse_duration, parse_time

from ..decision import (
    ControllerConfig, DecisionInput, History, MetricFailure, Reading, Recommendation, ScaleEvent,
)
from ..decision.spec import METRIC_TYPES, HPASpec, SpecError, parse_spec
from promscaler.selectors import Selector

from ..decision.spec import MetricSpec
from ..objects import (
    ObjectError, custom_value, external_metric_reading, object_metric_reading, pod_info, pod_labels,
    pod_metrics_reading, pods_metric_reading, scale_selector,
)

__all__ = ["ScenarioError", "Scenario", "load_scenarios", "build_scenario"]

_TOP_KEYS = {"now", "config", "hpa", "scaleTarget", "pods", "metrics", "history", "expect"}
_EXPECT_KEYS = {"desiredReplicas", "recommendation", "scale", "currentMetrics", "proposals", "conditions"}
_API_NAMES = {"Resource": "resource metrics API", "ContainerResource": "resource metrics API",
              "Pods": "custom metrics API", "Object": "custom metrics API", "External": "external metrics API"}


class ScenarioError(ValueError):
    """An invalid scenario: `path: reason`."""


@dataclass(frozen=True)
class Scenario:
    label: str                         # "file" or "file#2", plus the autoscaler's name
    input: DecisionInput
    expect: Mapping[str, Any] | None


# --- loading -------------------------------------------------------------------------------------


def load_scenarios(source: str, stdin: TextIO | None = None) -> list[tuple[str, Any]]:
    """(label, document) for every YAML/JSON document of a file, or of stdin for `-`."""
    name = "<stdin>" if source == "-" else source
    try:
        text = (stdin or sys.stdin).read() if source == "-" else open(source, encoding="utf-8").read()
    except OSError as exc:
        raise ScenarioError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{name}: not valid YAML{where}: {problem}") from None
    if not docs:
        raise ScenarioError(f"{name}: no scenario in the file")
    if len(docs) == 1:
        return [(name, docs[0])]
    return [(f"{name}#{i + 1}", d) for i, d in enumerate(docs)]


def _err(path: str, reason: str) -> ScenarioError:
    return ScenarioError(f"{path}: {reason}")


def _map(doc: Mapping[str, Any], key: str, path: str, required: bool = False) -> Mapping[str, Any]:
    value = doc.get(key)
    if value is None:
        if required:
            raise _err(path, "required")
        return {}
    if not isinstance(value, Mapping):
        raise _err(path, "must be an object")
    return value


def _list(doc: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _err(path, "must be a list")
    return value


def _int(value: Any, path: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _err(path, f"must be an integer, got {value!r}")
    if value < minimum:
        raise _err(path, f"must be greater than or equal to {minimum}")
    return value


def _time(value: Any, path: str) -> datetime:
    try:
        return parse_time(value)
    except DurationError:
        raise _err(path, f"not an RFC 3339 time: {value!r}") from None


def _seconds(value: Any, path: str) -> float:
    try:
        return parse_duration(value)
    except DurationError:
        raise _err(path, f"not a duration: {value!r}") from None


def _config(doc: Mapping[str, Any]) -> ControllerConfig:
    raw = _map(doc, "config", "config")
    unknown = set(raw) - {"tolerance", "cpuInitializationPeriod", "initialReadinessDelay", "downscaleStabilizationWindow"}
    if unknown:
        raise _err(f"config.{sorted(unknown)[0]}", "unknown field")
    base = ControllerConfig()
    tolerance = base.tolerance
    if raw.get("tolerance") is not None:
        try:
            tolerance = float(parse_quantity(raw["tolerance"]))
        except QuantityError:
            raise _err("config.tolerance", f"not a number: {raw['tolerance']!r}") from None
        if tolerance < 0:
            raise _err("config.tolerance", "must not be negative")

    def dur(key: str, default: float) -> float:
        return default if raw.get(key) is None else _seconds(raw[key], f"config.{key}")

    return ControllerConfig(
        tolerance=tolerance,
        cpu_initialization_period=dur("cpuInitializationPeriod", base.cpu_initialization_period),
        initial_readiness_delay=dur("initialReadinessDelay", base.initial_readiness_delay),
        downscale_stabilization_window=dur("downscaleStabilizationWindow", base.downscale_stabilization_window),
    )


def _history_entries(raw: Mapping[str, Any], key: str, count: str, make: Any) -> tuple[Any, ...]:
    """`history.<key>`: objects with a `timestamp` and an integer `<count>` field."""
    out = []
    for i, e in enumerate(_list(raw, key, f"history.{key}")):
        p = f"history.{key}[{i}]"
        if not isinstance(e, Mapping):
            raise _err(p, "must be an object")
        for name in ("timestamp", count):
            if e.get(name) is None:
                raise _err(f"{p}.{name}", "required")
        out.append(make(_time(e["timestamp"], f"{p}.timestamp"), _int(e[count], f"{p}.{count}")))
    return tuple(out)


def _history(doc: Mapping[str, Any]) -> History:
    raw = _map(doc, "history", "history")
    # Absent recommendations mean a fresh controller; an explicit list, even empty, is used as is.
    recs = (_history_entries(raw, "recommendations", "replicas", Recommendation)
            if raw.get("recommendations") is not None else None)
    return History(recs, _history_entries(raw, "scaleUpEvents", "replicaChange", ScaleEvent),
                   _history_entries(raw, "scaleDownEvents", "replicaChange", ScaleEvent))


def _expect(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if doc.get("expect") is None:
        return None
    expect = _map(doc, "expect", "expect")
    for key in expect:
        if key not in _EXPECT_KEYS:
            raise _err(f"expect.{key}", f"unknown field (use {', '.join(sorted(_EXPECT_KEYS))})")
    if "conditions" in expect and not isinstance(expect["conditions"], Mapping):
        raise _err("expect.conditions", "must be a map from condition type to reason")
    for key in ("currentMetrics", "proposals"):
        if key in expect and not isinstance(expect[key], list):
            raise _err(f"expect.{key}", "must be a list")
    return expect


def _wrap(prefix: str, exc: ObjectError) -> ScenarioError:
    sep = "" if exc.path.startswith("[") else "."
    return _err(f"{prefix}{sep}{exc.path}", exc.reason)


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


def _answer_external(items: Sequence[Mapping[str, Any]], ms: MetricSpec) -> list[Mapping[str, Any]]:
    """`<metric>?labelSelector=`: the series with the spec's name whose labels match its selector."""
    selector = ms.selector or Selector()
    out = []
    for i, item in enumerate(items):
        labels = item.get("metricLabels") or {}
        if not isinstance(labels, Mapping):
            raise ObjectError(f"[{i}].metricLabels", "must be an object")
        if item.get("metricName") == ms.name and selector.matches(labels):
            out.append(item)
    return out


def _readings(spec: HPASpec, metrics: Mapping[str, Any], pods: Sequence[str], namespace: str | None) -> list[Reading]:
    resource = _list(metrics, "resource", "metrics.resource")
    custom = _list(metrics, "custom", "metrics.custom")
    external = _list(metrics, "external", "metrics.external")
    for key, items in (("resource", resource), ("custom", custom), ("external", external)):
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise _err(f"metrics.{key}[{i}]", "must be an object")
    unknown = set(metrics) - {"resource", "custom", "external", "failures"}
    if unknown:
        raise _err(f"metrics.{sorted(unknown)[0]}", "unknown field (use resource, custom, external, failures)")
    failures: dict[tuple[str, str], str] = {}
    for i, f in enumerate(_list(metrics, "failures", "metrics.failures")):
        p = f"metrics.failures[{i}]"
        if not isinstance(f, Mapping):
            raise _err(p, "must be an object")
        if f.get("type") not in METRIC_TYPES:
            raise _err(f"{p}.type", f"must be one of {', '.join(METRIC_TYPES)}")
        if not f.get("name"):
            raise _err(f"{p}.name", "required")
        failures[(f["type"], str(f["name"]))] = str(f.get("message") or "the server is currently unable to handle the request")
    pod_set = set(pods)

    def in_namespace(obj_ns: Any) -> bool:
        return namespace is None or obj_ns in (None, namespace)

    out: list[Reading] = []
    for ms in spec.metrics:
        failure = failures.get((ms.type, ms.name))
        if failure is not None:
            out.append(MetricFailure(f"unable to fetch metrics from {_API_NAMES[ms.type]}: {failure}"))
            continue
        try:
            if ms.type in ("Resource", "ContainerResource"):
                mine = [it for it in resource
                        if (it.get("metadata") or {}).get("name") in pod_set
                        and in_namespace((it.get("metadata") or {}).get("namespace"))]
                out.append(pod_metrics_reading(mine, ms.name, ms.container))
            elif ms.type == "Pods":
                mine = [it for it in custom if in_namespace((it.get("describedObject") or {}).get("namespace"))]
                out.append(pods_metric_reading(_answer_pods(mine, ms), ms.name, pod_set))
            elif ms.type == "Object":
                mine = [it for it in custom if in_namespace((it.get("describedObject") or {}).get("namespace"))]
                ref = ms.described_object
                out.append(object_metric_reading(_answer_object(mine, ms), ms.name, ref.kind, ref.name))
            else:
                out.append(external_metric_reading(_answer_external(external, ms)))
        except ObjectError as exc:
            key = {"Resource": "resource", "ContainerResource": "resource", "External": "external"}.get(ms.type, "custom")
            raise _wrap(f"metrics.{key}", exc) from None
    return out


def build_scenario(label: str, doc: Any, default_now: datetime | None = None) -> Scenario:
    """Validate one scenario document and turn it into the decision's input."""
    if not isinstance(doc, Mapping):
        raise ScenarioError("scenario: must be an object with hpa, scaleTarget, pods, metrics")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise _err(sorted(unknown)[0], f"unknown field (use {', '.join(sorted(_TOP_KEYS))})")
    now = _time(doc["now"], "now") if doc.get("now") is not None else (default_now or datetime.now(UTC))
    config = _config(doc)
    hpa = _map(doc, "hpa", "hpa", required=True)
    api_version = hpa.get("apiVersion")
    if isinstance(api_version, str) and api_version.startswith("autoscaling/") and api_version != "autoscaling/v2":
        raise _err("hpa.apiVersion", f"{api_version} is not supported: use autoscaling/v2")
    meta = _map(hpa, "metadata", "hpa.metadata")
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    try:
        spec = parse_spec(hpa.get("spec"), "hpa.spec")
    except SpecError as exc:
        raise ScenarioError(str(exc)) from None
    status = _map(hpa, "status", "hpa.status")
    scaled_to_zero = any(
        isinstance(c, Mapping) and c.get("type") == "ScaledToZero" and c.get("status") == "True"
        for c in _list(status, "conditions", "hpa.status.conditions")
    )
    target = _map(doc, "scaleTarget", "scaleTarget", required=True)
    tspec = _map(target, "spec", "scaleTarget.spec", required=True)
    if tspec.get("replicas") is None:
        raise _err("scaleTarget.spec.replicas", "required")
    current = _int(tspec["replicas"], "scaleTarget.spec.replicas")
    tstatus = _map(target, "status", "scaleTarget.status")
    status_replicas = current if tstatus.get("replicas") is None else _int(tstatus["replicas"], "scaleTarget.status.replicas")
    selector, selector_error = scale_selector(target)
    if selector_error and tstatus.get("selector"):
        raise _err("scaleTarget.status.selector", selector_error.split(": ", 1)[-1])

    pods = []
    for i, raw in enumerate(_list(doc, "pods", "pods")):
        if not isinstance(raw, Mapping):
            raise _err(f"pods[{i}]", "must be an object")
        try:
            info = pod_info(raw)
        except ObjectError as exc:
            raise _wrap(f"pods[{i}]", exc) from None
        pod_ns = (raw.get("metadata") or {}).get("namespace")
        if namespace is not None and pod_ns not in (None, namespace):
            continue
        if selector is not None and selector.matches(pod_labels(raw)):
            pods.append(info)
    metrics = _map(doc, "metrics", "metrics")
    readings = _readings(spec, metrics, [p.name for p in pods], namespace)
    history = _history(doc)
    expect = _expect(doc)
    name = meta.get("name")
    full_label = f"{label} ({name})" if name else label
    inp = DecisionInput(
        spec=spec, current_replicas=current, status_replicas=status_replicas, pods=tuple(pods),
        readings=tuple(readings), now=now, config=config, history=history,
        scaled_to_zero=scaled_to_zero, selector_error=selector_error,
    )
    return Scenario(full_label, inp, expect)
