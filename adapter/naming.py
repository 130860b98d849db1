"""Series -> metrics: which API metric name a series becomes, and which Kubernetes resources
its labels describe (`resources.overrides` and `resources.template`), as prometheus-adapter does.

Resource names are normalized with a built-in table of the well-known kinds (the role of the
RESTMapper in prometheus-adapter): `pod`, `pods` and `Pod` all mean `pods`; labels that do not
name a known resource are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from adapter.gotemplate import Template, TemplateError
from adapter.rules import DiscoveryRule, GroupResource, RuleError, RulesConfig
from promscaler.times import DurationError, parse_duration

__all__ = ["Resource", "KNOWN_RESOURCES", "NAMESPACES", "normalize_resource", "go_expand", "ResourceConverter",
           "CompiledRule", "CompiledRules", "compile_rules", "rate_window"]


@dataclass(frozen=True)
class Resource:
    """A Kubernetes group-resource the adapter can describe metrics for."""

    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool

    @property
    def api_name(self) -> str:
        """`pods`, `deployments.apps`: the resource half of `pods/http_requests`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else "/v1"


def _r(group: str, plural: str, singular: str, kind: str, namespaced: bool = True) -> Resource:
    return Resource(group, plural, singular, kind, namespaced)


KNOWN_RESOURCES: tuple[Resource, ...] = (
    _r("", "pods", "pod", "Pod"),
    _r("", "namespaces", "namespace", "Namespace", False),
    _r("", "nodes", "node", "Node", False),
    _r("", "services", "service", "Service"),
    _r("", "endpoints", "endpoints", "Endpoints"),
    _r("", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim"),
    _r("", "persistentvolumes", "persistentvolume", "PersistentVolume", False),
    _r("", "configmaps", "configmap", "ConfigMap"),
    _r("", "secrets", "secret", "Secret"),
    _r("", "serviceaccounts", "serviceaccount", "ServiceAccount"),
    _r("", "replicationcontrollers", "replicationcontroller", "ReplicationController"),
    _r("apps", "deployments", "deployment", "Deployment"),
    _r("apps", "statefulsets", "statefulset", "StatefulSet"),
    _r("apps", "daemonsets", "daemonset", "DaemonSet"),
    _r("apps", "replicasets", "replicaset", "ReplicaSet"),
    _r("batch", "jobs", "job", "Job"),
    _r("batch", "cronjobs", "cronjob", "CronJob"),
    _r("networking.k8s.io", "ingresses", "ingress", "Ingress"),
    _r("autoscaling", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler"),
    _r("policy", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget"),
)
NAMESPACES = KNOWN_RESOURCES[1]
_GROUP_SANITIZER = str.maketrans({".": "_", "-": "_"})


def normalize_resource(group: str, resource: str) -> Resource | None:
    """The known resource a (group, resource-ish name) means; an empty group matches any group."""
    name = resource.lower()
    for r in KNOWN_RESOURCES:
        if name in (r.plural, r.singular, r.kind.lower()) and (
            not group or group == r.group or group.translate(_GROUP_SANITIZER) == r.group.translate(_GROUP_SANITIZER)
        ):
            return r
    return None


def resource_by_api_name(api_name: str) -> Resource | None:
    """`pods` or `deployments.apps` (as in URL paths) -> the resource."""
    plural, _, group = api_name.partition(".")
    return normalize_resource(group, plural) if (not group or normalize_resource(group, plural)) else None


_EXPAND = re.compile(r"\$(\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def go_expand(template: str, match: re.Match[str]) -> str:
    """Go's `Regexp.ExpandString`: `$1`, `${1}`, `$name`, `$$`; unknown groups expand to ''."""
    def repl(m: re.Match[str]) -> str:
        if m.group(1) == "$":
            return "$"
        name = m.group(2) or m.group(3)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:
            return ""
        return value or ""
    return _EXPAND.sub(repl, template)


class ResourceConverter:
    """Label <-> resource for one rule: overrides first, then the template."""

    def __init__(self, template: str, overrides: Mapping[str, GroupResource], where: str) -> None:
        self._label_to_res: dict[str, Resource] = {}
        self._res_to_label: dict[Resource, str] = {}
        self._template: Template | None = None
        self._extractor: re.Pattern[str] | None = None
        for label, gr in overrides.items():
            res = normalize_resource(gr.group, gr.resource)
            if res is None:
                raise RuleError(f"{where}.resources.overrides.{label}: unknown resource "
                                f"{(gr.group + '/' if gr.group else '') + gr.resource!r}")
            self._label_to_res[label] = res
            self._res_to_label[res] = label
        if template:
            try:
                self._template = Template(template, ("Group", "Resource"))
                pattern = self._template.render({"Group": "(?P<group>.+?)", "Resource": "(?P<resource>.+?)"})
                self._extractor = re.compile(f"^{pattern}$")
            except (TemplateError, re.error) as exc:
                raise RuleError(f"{where}.resources.template: {exc}") from None
            if "resource" not in self._extractor.groupindex:
                raise RuleError(f"{where}.resources.template: must include <<.Resource>>")

    def resource_for_label(self, label: str) -> Resource | None:
        res = self._label_to_res.get(label)
        if res is not None or self._extractor is None:
            return res
        m = self._extractor.match(label)
        if not m:
            return None
        group = m.group("group") if "group" in self._extractor.groupindex else ""
        return normalize_resource(group, m.group("resource"))

    def label_for_resource(self, res: Resource) -> str | None:
        label = self._res_to_label.get(res)
        if label is None and self._template is not None:
            label = self._template.render({"Group": res.group.translate(_GROUP_SANITIZER), "Resource": res.singular})
        return label or None

    def resources_for_labels(self, labels: Mapping[str, str]) -> list[Resource]:
        out = []
        for label in labels:
            res = self.resource_for_label(label)
            if res is not None and res not in out:
                out.append(res)
        return out


_WINDOW = re.compile(r"\[\s*([0-9][0-9a-z.]*)\s*(?::[^\]]*)?\]")


def rate_window(metrics_query: str) -> int | None:
    """Seconds of the first range selector (`rate(x[2m])` -> 120), or None when there is none."""
    m = _WINDOW.search(metrics_query)
    if not m:
        return None
    try:
        return int(parse_duration(m.group(1)))
    except DurationError:
        return None


_QUERY_FIELDS = ("Series", "LabelMatchers", "LabelValuesByName", "GroupBy", "GroupBySlice")


@dataclass(frozen=True)
class CompiledRule:
    rule: DiscoveryRule
    index: int
    external: bool
    filters: tuple[tuple[re.Pattern[str], bool], ...]
    name_regex: re.Pattern[str]
    name_as: str
    converter: ResourceConverter
    query: Template
    window_seconds: int | None

    @property
    def series_query(self) -> str:
        return self.rule.series_query

    @property
    def namespaced(self) -> bool:
        """External rules: whether the request's namespace becomes a matcher (default yes)."""
        return self.rule.namespaced is not False

    def accepts(self, series_name: str) -> bool:
        return all(bool(rx.search(series_name)) == positive for rx, positive in self.filters)

    def metric_name(self, series_name: str) -> str | None:
        m = self.name_regex.search(series_name)
        return go_expand(self.name_as, m) if m else None


def _regex(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleError(f"{where}: invalid regular expression {pattern!r}: {exc}") from None


def _compile(rule: DiscoveryRule, index: int, external: bool) -> CompiledRule:
    w = rule.path
    filters = []
    for i, f in enumerate(rule.series_filters):
        key = "is" if f.is_ else "isNot"
        filters.append((_regex(f.is_ or f.is_not, f"{w}.seriesFilters[{i}].{key}"), bool(f.is_)))
    if rule.name.matches:
        name_regex = _regex(rule.name.matches, f"{w}.name.matches")
        filters.append((name_regex, True))
    else:
        name_regex = re.compile(".*")
    name_as = rule.name.as_
    if not name_as:
        if name_regex.groups == 0:
            name_as = "$0"
        elif name_regex.groups == 1:
            name_as = "$1"
        else:
            raise RuleError(f"{w}.name.as: required when name.matches has more than one capture group")
    if not rule.resources.template and not rule.resources.overrides and not external:
        raise RuleError(f"{w}.resources: needs overrides or a template to associate series with resources")
    converter = ResourceConverter(rule.resources.template, rule.resources.overrides, w)
    try:
        query = Template(rule.metrics_query, _QUERY_FIELDS)
    except TemplateError as exc:
        raise RuleError(f"{w}.metricsQuery: {exc}") from None
    return CompiledRule(rule, index, external, tuple(filters), name_regex, name_as, converter, query,
                        rate_window(rule.metrics_query))


@dataclass(frozen=True)
class CompiledRules:
    rules: tuple[CompiledRule, ...]
    external_rules: tuple[CompiledRule, ...]

    @property
    def all(self) -> tuple[CompiledRule, ...]:
        return self.rules + self.external_rules


def compile_rules(cfg: RulesConfig) -> CompiledRules:
    """Compile every rule; the first problem raises `RuleError` naming index and field."""
    return CompiledRules(
        tuple(_compile(r, i, False) for i, r in enumerate(cfg.rules)),
        tuple(_compile(r, i, True) for i, r in enumerate(cfg.external_rules)),
    )
