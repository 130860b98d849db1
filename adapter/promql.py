"""PromQL building: label selectors -> matchers, and `metricsQuery` templating.

Every value that reaches PromQL goes through `quote` (a string literal) or `regex_alternation`
(a quoted, metacharacter-escaped regex), and every label key must be a Prometheus label name,
so no selector, namespace or object name can change the structure of a query.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from adapter.naming import CompiledRule
from promscaler.selectors import Operator, Selector

__all__ = [
    "QueryBuildError",
    "external_query",
    "quote",
    "regex_alternation",
    "regex_escape",
    "render_query",
    "resource_query",
    "selector_matchers",
    "workload_query",
]

_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RE2_ESCAPES = str.maketrans({c: "\\" + c for c in "\\.+*?()|[]{}^$"})  # each RE2 metacharacter, backslashed


class QueryBuildError(ValueError):
    """The request cannot be expressed as PromQL (bad label key, unsupported operator)."""


def quote(value: str) -> str:
    """A PromQL double-quoted string literal (Go `strconv.Unquote` escapes)."""
    return json.dumps(value, ensure_ascii=False)


def regex_escape(value: str) -> str:
    """`value` as an RE2 regex matching exactly it."""
    return value.translate(_RE2_ESCAPES)


def regex_alternation(values: Iterable[str]) -> str:
    """A quoted regex matching exactly one of `values` (Prometheus anchors regexes)."""
    return quote("|".join(regex_escape(v) for v in values))


def _check_label(key: str) -> str:
    if not _LABEL_NAME.match(key):
        raise QueryBuildError(f"label key {key!r} is not a valid Prometheus label name")
    return key


def matcher(key: str, values: Sequence[str], negative: bool = False) -> str:
    """`key="v"` / `key!="v"` for one value, `key=~"a|b"` / `key!~"a|b"` for several."""
    _check_label(key)
    if len(values) == 1:
        return f"{key}{'!=' if negative else '='}{quote(values[0])}"
    return f"{key}{'!~' if negative else '=~'}{regex_alternation(values)}"


def selector_matchers(selector: Selector) -> list[tuple[str, str, tuple[str, ...]]]:
    """(label, matcher text, values) per requirement, for every label-selector operator."""
    out = []
    for req in selector.requirements:
        op = req.operator
        if op in (Operator.EQUALS, Operator.IN):
            text = matcher(req.key, req.values)
        elif op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            text = matcher(req.key, req.values, negative=True)
        elif op is Operator.EXISTS:
            text = f'{_check_label(req.key)}!=""'
        elif op is Operator.DOES_NOT_EXIST:
            text = f'{_check_label(req.key)}=""'
        else:
            raise QueryBuildError(f"operator {op.value!r} (on {req.key!r}) is not supported for metric labels")
        out.append((req.key, text, req.values))
    return out


def render_query(rule: CompiledRule, series: str, matchers: Sequence[tuple[str, str, tuple[str, ...]]],
                 group_by: Sequence[str]) -> str:
    args = {
        "Series": series,
        "LabelMatchers": ",".join(m[1] for m in matchers),
        "LabelValuesByName": {m[0]: "|".join(m[2]) for m in matchers},
        "GroupBy": ",".join(group_by),
        "GroupBySlice": list(group_by),
    }
    query = rule.query.render(args)
    if not query.strip():
        raise QueryBuildError(f"{rule.rule.path}.metricsQuery produced an empty query")
    return query


def resource_query(rule: CompiledRule, series: str, resource_label: str, namespace_label: str | None,
                   namespace: str | None, names: Sequence[str], metric_selector: Selector) -> str:
    """The query for objects of one resource: namespace and name matchers plus metric labels.

    No `names` means every object (the resource label must merely be present).
    """
    matchers = selector_matchers(metric_selector)
    if namespace is not None and namespace_label:
        matchers.append((namespace_label, matcher(namespace_label, [namespace]), (namespace,)))
    if names:
        matchers.append((resource_label, matcher(resource_label, list(names)), tuple(names)))
    else:
        matchers.append((resource_label, f'{_check_label(resource_label)}!=""', ()))
    return render_query(rule, series, matchers, [resource_label])


def external_query(rule: CompiledRule, series: str, namespace_label: str | None, namespace: str | None,
                   selector: Selector) -> str:
    """The query for an external metric: the selector's matchers, plus the namespace for namespaced rules."""
    matchers = selector_matchers(selector)
    if namespace is not None and namespace_label and rule.namespaced:
        matchers.append((namespace_label, matcher(namespace_label, [namespace]), (namespace,)))
    return render_query(rule, series, matchers, [])


def workload_query(rule: CompiledRule, series: str, pod_label: str, ns_label: str | None, namespace: str | None,
                   pod_regex: str, selector: Selector) -> str:
    """The per-pod query for every pod whose name matches `pod_regex`, past pods included: a
    workload over history (backtest, and the total a Pods forecast is made on)."""
    matchers = selector_matchers(selector)
    if ns_label and namespace is not None:
        matchers.append((ns_label, matcher(ns_label, [namespace]), (namespace,)))
    matchers.append((pod_label, f"{_check_label(pod_label)}=~{quote(pod_regex)}", ()))
    return render_query(rule, series, matchers, [pod_label])
