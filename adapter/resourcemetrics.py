"""metrics.k8s.io from prometheus-adapter's `resourceRules`: the PromQL side (no URL paths here).

`resourceRules` holds `cpu` and `memory`, each with a `containerQuery` (per pod and container), a
`nodeQuery` (per node), `resources` (overrides/template: which labels name pods, namespaces,
nodes) and `containerLabel`, plus one `window`. Values are prometheus-adapter's
(`resource.NewMilliQuantity(int64(v*1000), ...)`: milli-units truncated toward zero, CPU
DecimalSI, memory BinarySI); a pod or node is served only with both a CPU and a memory answer.

Which pods and nodes exist comes from the watch-based cache (Running pods only, as
prometheus-adapter's and metrics-server's pod informers select `status.phase=Running`); names
that Prometheus has and the cluster does not are never served. Every request costs at most two
Prometheus queries, CPU and memory, whatever the number of pods or namespaces: lists ask for the
namespace (or everything) and are joined with the cache here, instead of one query per namespace
with every pod name in a regex as prometheus-adapter does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from adapter.gotemplate import Template, TemplateError
from adapter.naming import BUILTIN_TABLE, NAMESPACES, Resource, ResourceConverter, ResourceTable
from adapter.prometheus import PrometheusClient, PrometheusError, Sample
from adapter.promql import matcher
from adapter.provider import backend_failure
from adapter.rules import GroupResource, RuleError, RulesConfig
from promscaler.selectors import Operator, Selector
from promscaler.status import BadRequest, NotFound
from promscaler.times import DurationError, parse_duration

if TYPE_CHECKING:  # the watch caches import the kubernetes client: only when connected to a cluster
    from adapter.kube import LabelIndex

__all__ = ["NODES", "PODS", "RUNNING_PODS", "NodeUsage", "ObjectCache", "PodUsage", "ResourceMetricsProvider",
           "ResourceQuery", "ResourceRules", "compile_resource_rules", "reloader"]

log = logging.getLogger("adapter.resourcemetrics")


def _builtin(api_name: str) -> Resource:
    found = BUILTIN_TABLE.by_api_name(api_name)
    if found is None:
        raise LookupError(f"{api_name} is missing from the built-in resource table")
    return found


PODS = _builtin("pods")
NODES = _builtin("nodes")
RUNNING_PODS = "status.phase=Running"  # the field selector of prometheus-adapter's pod informer
_FIELDS = ("Series", "LabelMatchers", "LabelValuesByName", "GroupBy", "GroupBySlice")
_EVERYTHING = Selector()
_NAME_MATCHER_LIMIT = 100  # selected objects up to which the query names them (a regex); above: namespace only


# --- rules ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResourceQuery:
    """One of `resourceRules.cpu` / `.memory`, compiled."""

    path: str  # "resourceRules.cpu", for messages
    container: Template
    node: Template
    container_label: str
    pod_label: str
    namespace_label: str
    node_label: str


@dataclass(frozen=True)
class ResourceRules:
    cpu: ResourceQuery
    memory: ResourceQuery
    window_seconds: float


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RuleError(f"{where}.{key}: required, a non-empty string")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RuleError(f"{where}: must be a mapping, got {type(value).__name__}")
    return value


def _query(raw: Any, where: str, resources: ResourceTable) -> ResourceQuery:
    raw = _mapping(raw, where)
    if not raw:
        raise RuleError(f"{where}: required (containerQuery, nodeQuery, resources, containerLabel)")
    res = _mapping(raw.get("resources"), f"{where}.resources")
    overrides = {}
    for label, gr in _mapping(res.get("overrides"), f"{where}.resources.overrides").items():
        gr = _mapping(gr, f"{where}.resources.overrides.{label}")
        if not isinstance(gr.get("resource"), str) or not gr.get("resource"):
            raise RuleError(f"{where}.resources.overrides.{label}.resource: required, a non-empty string")
        overrides[str(label)] = GroupResource(str(gr.get("group") or ""), gr["resource"])
    template = res.get("template") or ""
    if not isinstance(template, str):
        raise RuleError(f"{where}.resources.template: must be a string")
    converter = ResourceConverter(template, overrides, where, resources)
    labels: dict[str, str] = {}
    for r, needed_by in ((PODS, "containerQuery"), (NAMESPACES, "containerQuery"), (NODES, "nodeQuery")):
        assert r is not None
        found = converter.label_for_resource(r)
        if found is None:
            raise RuleError(f"{where}.resources: no label maps to {r.plural} (the {needed_by} needs one)")
        labels[r.plural] = found
    templates = []
    for key in ("containerQuery", "nodeQuery"):
        try:
            templates.append(Template(_text(raw, key, where), _FIELDS))
        except TemplateError as exc:
            raise RuleError(f"{where}.{key}: {exc}") from None
    container_label = raw.get("containerLabel")
    if not isinstance(container_label, str) or not container_label:
        raise RuleError(f"{where}.containerLabel: required: the label that names containers (usually `container`)")
    return ResourceQuery(where, templates[0], templates[1], container_label, labels["pods"], labels["namespaces"],
                         labels["nodes"])


def compile_resource_rules(raw: Mapping[str, Any] | None, resources: ResourceTable = BUILTIN_TABLE
                           ) -> ResourceRules | None:
    """`resourceRules` of a rules file, compiled; None when the file has none. Problems raise
    `RuleError` naming the field (`resourceRules.memory.nodeQuery: ...`)."""
    if raw is None:
        return None
    raw = _mapping(raw, "resourceRules")
    window = raw.get("window", 0)
    try:
        window_seconds = parse_duration(window)
    except DurationError as exc:
        raise RuleError(f"resourceRules.window: {exc}") from None
    return ResourceRules(_query(raw.get("cpu"), "resourceRules.cpu", resources),
                         _query(raw.get("memory"), "resourceRules.memory", resources), window_seconds)


def reloader(provider: ResourceMetricsProvider | None
             ) -> Callable[[RulesConfig, ResourceTable], Callable[[], None]]:
    """For `Discovery(also_reload=...)`: a reloaded file's resourceRules, compiled (a bad one raises
    `RuleError`, and the whole file is kept out) and then served. Whether metrics.k8s.io is served
    at all is decided at start-up (its routes, its APIService): adding or removing resourceRules
    takes a restart, and says so."""
    def compile_them(config: RulesConfig, resources: ResourceTable) -> Callable[[], None]:
        rules = compile_resource_rules(config.resource_rules, resources)

        def take() -> None:
            if provider is None:
                if rules is not None:
                    log.warning("the rules file now has resourceRules: serving metrics.k8s.io takes a restart")
            elif rules is None:
                log.warning("the rules file no longer has resourceRules: metrics.k8s.io keeps the last ones "
                            "until a restart")
            else:
                provider.set_rules(rules)
        return take
    return compile_them


def _render(template: Template, matchers: list[tuple[str, str, tuple[str, ...]]], group_by: list[str]) -> str:
    return template.render({
        "Series": "",
        "LabelMatchers": ",".join(m[1] for m in matchers),
        "LabelValuesByName": {m[0]: "|".join(m[2]) for m in matchers},
        "GroupBy": ",".join(group_by),
        "GroupBySlice": group_by,
    })


def _name_matcher(label: str, names: list[str]) -> tuple[str, str, tuple[str, ...]]:
    if not names:
        return label, f'{label}!=""', ()
    return label, matcher(label, names), tuple(names)


def pod_query(q: ResourceQuery, namespace: str | None, names: list[str]) -> str:
    """The containerQuery for `names` in `namespace` (None: every namespace; no names: every pod),
    grouped by namespace, pod and container so that one query answers many namespaces."""
    matchers: list[tuple[str, str, tuple[str, ...]]] = []
    if namespace is not None:
        matchers.append((q.namespace_label, matcher(q.namespace_label, [namespace]), (namespace,)))
    matchers.append(_name_matcher(q.pod_label, names))
    return _render(q.container, matchers, list(dict.fromkeys([q.namespace_label, q.pod_label, q.container_label])))


def node_query(q: ResourceQuery, names: list[str]) -> str:
    return _render(q.node, [_name_matcher(q.node_label, names)], [q.node_label])


# --- answers ----------------------------------------------------------------------------------

class PodUsage(NamedTuple):
    namespace: str
    name: str
    labels: dict[str, str]
    timestamp: float  # the earliest of its samples
    containers: list[tuple[str, int, int]]  # (container, CPU milli-cores, memory milli-bytes), by name


class NodeUsage(NamedTuple):
    name: str
    labels: dict[str, str]
    timestamp: float
    cpu_milli: int
    memory_milli: int


class ObjectCache(Protocol):
    """The watch-based cache (adapter.kube.LabelCache)."""

    async def index(self, resource: Resource, field_selector: str = "") -> LabelIndex: ...

    def start(self, *resources: Resource, field_selector: str = "") -> None: ...

    def unsynced(self, resource: Resource, field_selector: str = "") -> str | None: ...


def _first(item: tuple) -> Any:
    return item[0]


def _milli(value: float) -> int:
    """`int64(value * 1000.0)`: Go's conversion truncates toward zero, and so does int()."""
    return int(value * 1000.0)


def check_field_selector(fields: Selector) -> None:
    """metrics-server filters on `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`."""
    for r in fields.requirements:
        if r.key not in ("metadata.name", "metadata.namespace"):
            raise BadRequest(f'field label not supported: "{r.key}" (metadata.name and metadata.namespace are)')
        if r.operator not in (Operator.EQUALS, Operator.NOT_EQUALS) or len(r.values) != 1:
            raise BadRequest(f"invalid field selector {r}: only =, == and != are supported")


def _select(index: LabelIndex, namespace: str | None, labels: Selector, fields: Selector
            ) -> list[tuple[tuple[str, str], dict[str, str]]]:
    """(key, labels) of the cached objects in `namespace` (None: all) matching both selectors."""
    items = index.items
    if namespace is not None:
        keys: Iterable[tuple[str, str]] = ((namespace, n) for n in index.select(namespace, labels))
    elif labels.empty():
        keys = items.keys()
    else:
        keys = (k for k, v in items.items() if labels.matches(v))
    out = [(k, items[k]) for k in keys]
    if not fields.empty():
        out = [(k, v) for k, v in out if fields.matches({"metadata.namespace": k[0], "metadata.name": k[1]})]
    return out


class ResourceMetricsProvider:
    """PodMetrics and NodeMetrics values for the routes (adapter.resourceroutes)."""

    def __init__(self, rules: ResourceRules, prometheus: PrometheusClient, objects: ObjectCache,
                 query_cache_ttl: float | None = None) -> None:
        self.prometheus = prometheus
        self.objects = objects
        self.query_cache_ttl = query_cache_ttl
        self.generation = 0  # changes with the rules: answers kept under an older one are not served
        self.set_rules(rules)

    def set_rules(self, rules: ResourceRules) -> None:
        """Serve `rules` from now on (a rules file reload)."""
        self.rules = rules
        # answers reused as custom metrics' are: 1/30 of the window, at most 5 s (or the flag)
        self.ttl = self.query_cache_ttl if self.query_cache_ttl is not None else (
            min(rules.window_seconds / 30.0, 5.0) if rules.window_seconds else 1.0)
        self.generation += 1

    def start(self) -> None:
        """Start the two informers now, so that the first request finds them synced."""
        self.objects.start(PODS, field_selector=RUNNING_PODS)
        self.objects.start(NODES)

    def unsynced(self) -> str | None:
        """None once the pod and node caches have listed, else why not (readiness)."""
        reasons = [r for r in (self.objects.unsynced(PODS, RUNNING_PODS), self.objects.unsynced(NODES)) if r]
        return "; ".join(reasons) or None

    async def versions(self) -> tuple[int, int]:
        """Changes whenever the running pods or the nodes (or their labels) do."""
        pods = await self.objects.index(PODS, RUNNING_PODS)
        nodes = await self.objects.index(NODES)
        return pods.version, nodes.version

    async def _both(self, cpu_query: str, memory_query: str) -> tuple[list[Sample], list[Sample], float]:
        async def run(path: str, query: str) -> tuple[list[Sample], float]:
            try:
                return await self.prometheus.query_fresh(query, self.ttl)
            except PrometheusError as exc:
                raise backend_failure(exc, path, query) from None
        (cpu, fresh_cpu), (mem, fresh_mem) = await asyncio.gather(
            run(f"{self.rules.cpu.path} query", cpu_query), run(f"{self.rules.memory.path} query", memory_query))
        return cpu, mem, min(fresh_cpu, fresh_mem)

    # -- pods ------------------------------------------------------------------------------------
    async def pods(self, namespace: str | None, name: str | None, labels: Selector = _EVERYTHING,
                   fields: Selector = _EVERYTHING) -> tuple[list[PodUsage], float]:
        """Usage of the running pods asked for, by (namespace, name), and until when the answer
        may be reused; a pod with no CPU or no memory answer is left out (404 when asked by name)."""
        check_field_selector(fields)
        index = await self.objects.index(PODS, RUNNING_PODS)
        if name is not None:
            assert namespace is not None
            pod_labels = index.items.get((namespace, name))
            selected = [((namespace, name), pod_labels)] if pod_labels is not None else []
        else:
            selected = _select(index, namespace, labels, fields)
        if not selected:
            if name is not None:
                raise _pod_not_found(namespace, name)
            return [], 0.0
        narrowed = name is not None or not (labels.empty() and fields.empty())
        names = sorted({k[1] for k, _ in selected}) if narrowed and len(selected) <= _NAME_MATCHER_LIMIT else []
        cpu_q, mem_q = self.rules.cpu, self.rules.memory
        cpu, mem, fresh_until = await self._both(pod_query(cpu_q, namespace, names), pod_query(mem_q, namespace, names))
        cpu_by = _by_pod(cpu, cpu_q, namespace)
        mem_by = _by_pod(mem, mem_q, namespace)
        out = []
        selected.sort(key=_first)
        for key, pod_labels in selected:
            c = cpu_by.get(key)
            if c is None or (m := mem_by.get(key)) is None:
                continue  # prometheus-adapter: "unable to fetch CPU/memory metrics for pod, skipping"
            if len(c) == 1 and len(m) == 1:  # the usual pod: one container with both resources
                [(container, (cv, cts))] = c.items()
                mt = m.get(container)
                if mt is not None:
                    out.append(PodUsage(key[0], key[1], pod_labels, min(cts, mt[1]),
                                        [(container, int(cv * 1000.0), int(mt[0] * 1000.0))]))
                    continue
            containers = []
            earliest = min(ts for _, ts in (*c.values(), *m.values()))
            for container in sorted(c.keys() | m.keys()):
                cpv, mev = c.get(container), m.get(container)  # one missing: it is 0, as prometheus-adapter has it
                containers.append((container, _milli(cpv[0]) if cpv else 0, _milli(mev[0]) if mev else 0))
            out.append(PodUsage(key[0], key[1], pod_labels, earliest, containers))
        if name is not None and not out:
            raise _pod_not_found(namespace, name)
        return out, fresh_until

    # -- nodes -----------------------------------------------------------------------------------
    async def nodes(self, name: str | None, labels: Selector = _EVERYTHING, fields: Selector = _EVERYTHING
                    ) -> tuple[list[NodeUsage], float]:
        check_field_selector(fields)
        index = await self.objects.index(NODES)
        if name is not None:
            node_labels = index.items.get(("", name))
            selected = [(("", name), node_labels)] if node_labels is not None else []
        else:
            selected = _select(index, None, labels, fields)
        if not selected:
            if name is not None:
                raise _node_not_found(name)
            return [], 0.0
        narrowed = name is not None or not (labels.empty() and fields.empty())
        names = sorted(k[1] for k, _ in selected) if narrowed and len(selected) <= _NAME_MATCHER_LIMIT else []
        cpu_q, mem_q = self.rules.cpu, self.rules.memory
        cpu, mem, fresh_until = await self._both(node_query(cpu_q, names), node_query(mem_q, names))
        cpu_by, mem_by = _by_node(cpu, cpu_q.node_label, names), _by_node(mem, mem_q.node_label, names)
        out = []
        selected.sort(key=_first)
        for (_, node), node_labels in selected:
            c, m = cpu_by.get(node), mem_by.get(node)
            if c is None or m is None:
                continue  # prometheus-adapter: "missing CPU/memory for node, skipping"
            out.append(NodeUsage(node, node_labels, min(c.timestamp, m.timestamp), _milli(c.value), _milli(m.value)))
        if name is not None and not out:
            raise _node_not_found(name)
        return out, fresh_until


def _pod_not_found(namespace: str | None, name: str) -> NotFound:
    """As metrics-server words it: the pod is not running, unknown, or has no metrics."""
    return NotFound(f'pods.metrics.k8s.io "{namespace}/{name}" not found',
                    {"name": name, "group": "metrics.k8s.io", "kind": "pods"})


def _node_not_found(name: str) -> NotFound:
    return NotFound(f'nodes.metrics.k8s.io "{name}" not found',
                    {"name": name, "group": "metrics.k8s.io", "kind": "nodes"})


def _by_pod(samples: list[Sample], q: ResourceQuery, namespace: str | None
            ) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
    """(namespace, pod) -> container -> (value, timestamp); a later sample of the same container
    replaces an earlier one, as prometheus-adapter's map assignment does."""
    out: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    ns_label, pod_label, container_label = q.namespace_label, q.pod_label, q.container_label
    for labels, ts, value in samples:
        pod = labels.get(pod_label)
        ns = labels.get(ns_label) or namespace
        if not pod or ns is None:
            continue
        out.setdefault((ns, pod), {})[labels.get(container_label, "")] = (value, ts)
    return out


def _by_node(samples: list[Sample], label: str, names: list[str]) -> dict[str, Sample]:
    """node -> its first sample (prometheus-adapter reads `rawCPUs[0]`)."""
    out: dict[str, Sample] = {}
    for s in samples:
        node = s.labels.get(label)
        if node is None and len(names) == 1 and len(samples) == 1:
            node = names[0]  # the query aggregated the label away; the answer is still this node
        if node:
            out.setdefault(node, s)
    return out
