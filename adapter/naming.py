"""Series -> metrics: which API metric name a series becomes, and which Kubernetes resources
its labels describe (`resources.overrides` and `resources.template`), as prometheus-adapter does.

Resource names are normalized with a `ResourceTable` (the role of the RESTMapper in
prometheus-adapter): `pod`, `pods` and `Pod` all mean `pods`; labels that do not name a known
resource are ignored. Offline the table is the built-in one of the well-known kinds; connected to
a cluster it is built from API discovery, so custom resources (`rollouts.argoproj.io`) work too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from adapter.gotemplate import Template, TemplateError
from adapter.rules import DiscoveryRule, GroupResource, RuleError, RulesConfig
from promscaler.apidiscovery import APIResource
from promscaler.times import DurationError, parse_duration

__all__ = [
    "BUILTIN_TABLE",
    "KNOWN_RESOURCES",
    "NAMESPACES",
    "CompiledRule",
    "CompiledRules",
    "Resource",
    "ResourceConverter",
    "ResourceTable",
    "compile_rules",
    "go_expand",
    "normalize_resource",
    "rate_window",
    "resource_by_api_name",
]


@dataclass(frozen=True)
class Resource:
    """A Kubernetes group-resource the adapter can describe metrics for."""

    group: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    version: str = "v1"

    @property
    def api_name(self) -> str:
        """`pods`, `deployments.apps`: the resource half of `pods/http_requests`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        """describedObject's apiVersion: `<group>/<version>`; core resources answer `/v1`, as
        prometheus-adapter does (clients ignore it for core kinds)."""
        return f"{self.group}/{self.version}" if self.group else "/v1"

    @classmethod
    def from_api(cls, r: APIResource) -> Resource:
        return cls(r.group, r.name, r.singular, r.kind, r.namespaced, r.version)


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


class ResourceTable:
    """The resources labels and URL paths may name, in priority order (core first, then the
    groups in discovery order): an ambiguous name (`pods` is also `pods.metrics.k8s.io`)
    means the first. Immutable; equal tables hold the same resources in the same order."""

    def __init__(self, resources: Iterable[Resource], source: str = "built-in") -> None:
        self.resources: tuple[Resource, ...] = tuple(dict.fromkeys(resources))
        self.source = source
        self._by_name: dict[str, list[Resource]] = {}
        for r in self.resources:
            for name in dict.fromkeys((r.plural, r.singular.lower(), r.kind.lower())):
                self._by_name.setdefault(name, []).append(r)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceTable) and self.resources == other.resources

    def __hash__(self) -> int:
        return hash(self.resources)

    def __len__(self) -> int:
        return len(self.resources)

    def normalize(self, group: str, resource: str) -> Resource | None:
        """The resource a (group, plural|singular|kind) means, case-insensitively; an empty group
        matches any group, and `_` stands for `.`/`-` in group names (`argoproj_io`)."""
        for r in self._by_name.get(resource.lower(), ()):
            if (not group or group == r.group
                    or group.translate(_GROUP_SANITIZER) == r.group.translate(_GROUP_SANITIZER)):
                return r
        return None

    def by_api_name(self, api_name: str) -> Resource | None:
        """`pods`, `deployments.apps`, `rollouts.argoproj.io` (as in URL paths) -> the resource."""
        plural, _, group = api_name.partition(".")
        return self.normalize(group, plural)


BUILTIN_TABLE = ResourceTable(KNOWN_RESOURCES)


def normalize_resource(group: str, resource: str) -> Resource | None:
    """The built-in resource a (group, resource-ish name) means; an empty group matches any group."""
    return BUILTIN_TABLE.normalize(group, resource)


def resource_by_api_name(api_name: str) -> Resource | None:
    """`pods` or `deployments.apps` (as in URL paths) -> the built-in resource."""
    return BUILTIN_TABLE.by_api_name(api_name)


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


_OFFLINE_HINT = ("; custom resources are resolved through API discovery: connect the adapter to the cluster "
                 "(--kubeconfig or --in-cluster)")


class ResourceConverter:
    """Label <-> resource for one rule: overrides first (resolved when the rules are compiled),
    then the template (resolved through the current table, so later CRDs are picked up)."""

    def __init__(self, template: str, overrides: Mapping[str, GroupResource], where: str,
                 resources: ResourceTable = BUILTIN_TABLE) -> None:
        self.resources = resources
        self._label_to_res: dict[str, Resource] = {}
        self._res_to_label: dict[str, str] = {}  # by api name: stable across table refreshes
        self._template: Template | None = None
        self._extractor: re.Pattern[str] | None = None
        self._rendered_labels: dict[str, Resource] | None = None
        for label, gr in overrides.items():
            res = resources.normalize(gr.group, gr.resource)
            if res is None:
                raise RuleError(f"{where}.resources.overrides.{label}: unknown resource "
                                f"{(gr.group + '/' if gr.group else '') + gr.resource!r}"
                                + (_OFFLINE_HINT if resources is BUILTIN_TABLE else " (not served by the cluster)"))
            self._label_to_res[label] = res
            self._res_to_label[res.api_name] = label
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
        if "group" not in self._extractor.groupindex:
            return self.resources.normalize("", m.group("resource"))
        # `kube_argoproj_io_rollout` splits as group `argoproj`: when the first split names no
        # resource, look the label up among the labels the template renders for the table
        return self.resources.normalize(m.group("group"), m.group("resource")) or self._rendered().get(label)

    def _rendered(self) -> dict[str, Resource]:
        if self._rendered_labels is None:
            out: dict[str, Resource] = {}
            for r in self.resources.resources:
                out.setdefault(self._render(r), r)
            self._rendered_labels = out
        return self._rendered_labels

    def _render(self, res: Resource) -> str:
        assert self._template is not None
        return self._template.render({"Group": res.group.translate(_GROUP_SANITIZER), "Resource": res.singular})

    def with_resources(self, resources: ResourceTable) -> ResourceConverter:
        """The same converter resolving template labels through `resources` (overrides keep theirs)."""
        if resources == self.resources:
            return self
        new = copy.copy(self)
        new.resources = resources
        new._rendered_labels = None
        return new

    def label_for_resource(self, res: Resource) -> str | None:
        label = self._res_to_label.get(res.api_name)
        if label is None and self._template is not None:
            label = self._render(res)
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

    def forecast_name(self, series_name: str) -> str | None:
        """The name the rule's forecast of this series is served as (None: the rule has no forecast):
        `forecast.name` expanded like `name.as`, else `<metric>_forecast`."""
        forecast = self.rule.forecast
        m = self.name_regex.search(series_name)
        if forecast is None or not m:
            return None
        if forecast.name:
            return go_expand(forecast.name, m) or None
        metric = go_expand(self.name_as, m)
        return f"{metric}_forecast" if metric else None


def _regex(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleError(f"{where}: invalid regular expression {pattern!r}: {exc}") from None


def _compile(rule: DiscoveryRule, index: int, external: bool, resources: ResourceTable) -> CompiledRule:
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
    converter = ResourceConverter(rule.resources.template, rule.resources.overrides, w, resources)
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
    resources: ResourceTable = BUILTIN_TABLE  # also how URL paths name resources

    @property
    def all(self) -> tuple[CompiledRule, ...]:
        return self.rules + self.external_rules

    def with_resources(self, resources: ResourceTable) -> CompiledRules:
        """These rules with templates (and URL paths) resolved through a newer table."""
        if resources == self.resources:
            return self

        def move(rules: tuple[CompiledRule, ...]) -> tuple[CompiledRule, ...]:
            return tuple(replace(r, converter=r.converter.with_resources(resources)) for r in rules)
        return CompiledRules(move(self.rules), move(self.external_rules), resources)


def compile_rules(cfg: RulesConfig, resources: ResourceTable = BUILTIN_TABLE) -> CompiledRules:
    """Compile every rule against `resources`; the first problem raises `RuleError` naming index and field."""
    return CompiledRules(
        tuple(_compile(r, i, False, resources) for i, r in enumerate(cfg.rules)),
        tuple(_compile(r, i, True, resources) for i, r in enumerate(cfg.external_rules)),
        resources,
    )
