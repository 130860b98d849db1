"""Series discovery: which metrics exist, refreshed in the background.

Every `--metrics-relist-interval` each distinct `seriesQuery` is asked once (rules sharing it
share the calls); its series are filtered and named per rule, and the new `Catalogue` replaces
the old one in a single assignment, so a request sees either the old or the new one whole.
A failed `seriesQuery` keeps its own last good series; the others still refresh. The rules
file is re-read when it changes on disk, keeping the last good configuration when the new one
is invalid (its resourceRules included: `also_reload`).

What a rule turns into depends only on each series' name and on which of its labels name a
resource, never on label values. So aggregated discovery (the default, issue 7) lets Prometheus
do the grouping: the metric names (`/api/v1/label/__name__/values?match[]=Q`), the label names
(`/api/v1/labels?match[]=Q`), and per resource label L the names of series that carry it
(`match[]=Q` narrowed by `L!=""`): 2 + (resource labels) small answers, whatever the number of
series; the catalogue is the one `/api/v1/series` would give. `--metrics-discovery=series` (and
any seriesQuery that is not a plain selector, or a backend without these endpoints) uses the exact
`/api/v1/series` listing. The label endpoints see every series in the blocks that overlap the
window (a stopped series stays for up to ~2h), so the names come from one query instead,
`group by (__name__) (last_over_time(Q[max-age]))`: a metric is listed only while it has samples
within `--metrics-max-age` (default: the relist interval). The series listing is filtered by the
same query (VictoriaMetrics' index works by the day: its `/api/v1/series` lists a series stopped
minutes ago). A backend that refuses aggregation (a limit) gets the series listing, said once. Which
resource labels a name carries still comes from the index: a name that is fresh for one resource
keeps its other resources listed while their series are in the index.

Connected to a cluster, the resources rules can name come from its API discovery
(`fetch_resource_table`: aggregated discovery, two requests, else the legacy walk), refreshed
before each relist: templates then see CRDs installed later,
overrides on the next rules-file reload (they are resolved when the rules are compiled).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adapter import rulecheck
from adapter.naming import CompiledRule, CompiledRules, Resource, ResourceConverter, ResourceTable, compile_rules
from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusQueryError, PrometheusUnavailable
from adapter.rules import Forecast, RuleError, RulesConfig, parse_rules
from promscaler.apidiscovery import (
    AGGREGATED_ACCEPT,
    PreferredVersion,
    is_aggregated,
    parse_resource_list,
    preferred_group_versions,
    preferred_versions,
)
from promscaler.logs import vlog
from promscaler.wire import CUSTOM_GROUP, EXTERNAL_GROUP

__all__ = ["Catalogue", "CustomMetric", "Discovery", "ExternalMetric", "ResourceDiscoveryError", "fetch_resource_table"]

log = logging.getLogger("adapter.discovery")


@dataclass(frozen=True, slots=True)
class CustomMetric:
    resource: Resource
    metric: str
    series: str
    rule: CompiledRule
    forecast: Forecast | None = None  # set: this is the rule's forecast of `series`


@dataclass(frozen=True, slots=True)
class ExternalMetric:
    metric: str
    series: str
    rule: CompiledRule
    forecast: Forecast | None = None


@dataclass(frozen=True)
class Catalogue:
    custom: Mapping[tuple[str, str], CustomMetric] = field(default_factory=dict)  # (resource api name, metric)
    external: Mapping[str, ExternalMetric] = field(default_factory=dict)
    series_count: int = 0


_SELECTOR = re.compile(r"^\s*(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)?\s*(?:\{(?P<body>.*)\})?\s*$", re.S)


def with_matcher(series_query: str, matcher: str) -> str | None:
    """`series_query` narrowed by one more matcher (`m{a="b"}` -> `m{a="b",pod!=""}`), or None when
    it is not a plain series selector (offsets, several selectors...) and must be listed exactly."""
    m = _SELECTOR.match(series_query)
    if not m or (m.group("name") is None and m.group("body") is None):
        return None
    body = (m.group("body") or "").strip()
    if body and not body.endswith(","):
        body += ","
    return f"{m.group('name') or ''}{{{body}{matcher}}}"


# One matcher of a selector's body and the comma after it: a label, an operator, a quoted value
# (PromQL's double, single and backtick quotes, with escapes in the first two).
_MATCHER = re.compile(r"""\s*(?P<label>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*"""
                      r"""(?P<value>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(?:,|$)""", re.S)


def required_labels(series_query: str) -> frozenset[str]:
    """The labels every series of a plain selector has: those it matches with `label!=""` or
    `label="<not empty>"` (prometheus-adapter's usual `{namespace!="",pod!=""}`). Every name it
    lists carries them, so discovery does not ask Prometheus which names do. Empty when the
    selector's body does not read as plain matchers."""
    m = _SELECTOR.match(series_query)
    body = (m.group("body") or "") if m else ""
    required: set[str] = set()
    at = 0
    while at < len(body.rstrip()):
        found = _MATCHER.match(body, at)
        if found is None:
            return frozenset()
        at = found.end()
        empty = len(found["value"]) == 2  # just the quotes
        if (found["op"] == "!=" and empty) or (found["op"] == "=" and not empty):
            required.add(found["label"])
    return frozenset(required)


class _NotAggregatable(Exception):
    """This seriesQuery (or backend) needs the exact `/api/v1/series` listing."""


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _NotAggregatable(f"{what} did not answer a list of strings")
    return value


def _unanswered(exc: PrometheusError) -> bool:
    """Unreachable or timed out, as opposed to an answer that refuses (a limit, a missing endpoint)."""
    return isinstance(exc, PrometheusUnavailable) and exc.status is None


def _paths(rules: CompiledRules, series_query: str) -> str:
    return ", ".join(r.rule.path for r in rules.all if r.series_query == series_query)


class ResourceDiscoveryError(Exception):
    """The cluster's API discovery could not be read; the message is one line."""


class GetJSON(Protocol):
    """GET a path of the API server asking for `accept`; the decoded JSON object."""

    def __call__(self, path: str, accept: str = ...) -> Awaitable[Mapping]: ...


_OWN_GROUPS = (CUSTOM_GROUP, EXTERNAL_GROUP)  # this adapter's metrics APIs: no objects to name


async def fetch_resource_table(get_json: GetJSON, previous: ResourceTable | None = None) -> ResourceTable:
    """The cluster's resources: the core group's first (`pods` is the core one), then each group's
    preferred version, in discovery order. Aggregated discovery: `/api` and `/apis`, two requests
    in parallel, hold them all; a server that answers them the legacy way (no
    apidiscovery.k8s.io/v2) gets the legacy walk, `/api/v1` and one request per group. A group
    version that fails (an aggregated API that is down; `Stale` in aggregated discovery) keeps its
    resources from `previous`, or is left out."""
    async def get(path: str, accept: str = "application/json") -> Mapping:
        try:
            return await get_json(path, accept=accept)
        except Exception as exc:
            raise ResourceDiscoveryError(f"GET {path}: {exc}") from None

    async def walk(gv: str) -> PreferredVersion:
        group, _, version = gv.rpartition("/")
        doc = await get(f"/apis/{gv}" if group else "/api/v1")
        return PreferredVersion(group, version, tuple(parse_resource_list(doc, gv)))

    async def core() -> list[PreferredVersion]:
        doc = await get("/api", AGGREGATED_ACCEPT)
        return preferred_versions(doc) if is_aggregated(doc) else [await walk("v1")]

    async def groups() -> list[tuple[str, PreferredVersion | BaseException]]:
        doc = await get("/apis", AGGREGATED_ACCEPT)
        if is_aggregated(doc):
            return [(v.group_version, v) for v in preferred_versions(doc) if v.group not in _OWN_GROUPS]
        gvs = [gv for gv in preferred_group_versions(doc) if gv.partition("/")[0] not in _OWN_GROUPS]
        return list(zip(gvs, await asyncio.gather(*(walk(gv) for gv in gvs), return_exceptions=True), strict=True))

    core_versions, group_versions = await asyncio.gather(core(), groups())
    entries = [Resource.from_api(r) for v in core_versions for r in v.resources]
    for gv, found in group_versions:
        if isinstance(found, PreferredVersion) and not found.stale:
            entries.extend(Resource.from_api(r) for r in found.resources)
            continue
        if not isinstance(found, ResourceDiscoveryError | PreferredVersion):
            raise found
        group = gv.partition("/")[0]
        kept = [r for r in previous.resources if r.group == group] if previous is not None else []
        log.warning("API discovery of %s failed (%s); %s", gv, found if isinstance(found, BaseException)
                    else "Stale in aggregated discovery: its aggregated API did not answer",
                    f"keeping its {len(kept)} known resources" if kept else "its resources are unknown for now")
        entries.extend(kept)
    return ResourceTable(entries, "API discovery")


def build_catalogue(rules: CompiledRules, series_by_query: Mapping[str, Sequence[Mapping[str, str]]]) -> Catalogue:
    """Pure: rules plus the series each seriesQuery returned -> the metrics served. Forecasts come
    second: a forecast name that a rule also yields as a metric is that metric."""
    custom: dict[tuple[str, str], CustomMetric] = {}
    external: dict[str, ExternalMetric] = {}
    for forecasts in (False, True):
        for rule in rules.all:
            forecast = rule.rule.forecast
            if forecasts and forecast is None:
                continue
            for labels in series_by_query.get(rule.series_query, ()):
                name = labels.get("__name__", "")
                if not name or not rule.accepts(name):
                    continue
                metric = rule.forecast_name(name) if forecasts else rule.metric_name(name)
                if not metric:
                    continue
                kept = forecast if forecasts else None
                if rule.external:
                    external.setdefault(metric, ExternalMetric(metric, name, rule, kept))
                    continue
                for res in rule.converter.resources_for_labels(labels):
                    custom.setdefault((res.api_name, metric), CustomMetric(res, metric, name, rule, kept))
    count = sum(len(v) for v in series_by_query.values())
    return Catalogue(custom, external, count)


def effective_max_age(max_age: float | None, relist_interval: float) -> float:
    """`--metrics-max-age`, by default the relist interval (prometheus-adapter's)."""
    return max_age if max_age is not None else relist_interval


async def fresh_names(prometheus: PrometheusClient, query: str, start: float | None, max_age: float) -> list[str]:
    """Names with a sample within `--metrics-max-age`. The label endpoints answer from the index
    (every series of the blocks overlapping the window, start/end notwithstanding: a stopped
    series stays there for up to ~2h), so freshness is asked as one small query whose answer
    has one element per name (`last_over_time` reads the last samples, within the window)."""
    if not max_age:
        return _strings(await prometheus.label_values("__name__", query, start), "label values")
    window = f"{max(1, round(max_age * 1000))}ms"
    samples = await prometheus.query(f"group by (__name__) (last_over_time({query}[{window}]))")
    names = [s.labels.get("__name__") or "" for s in samples]
    if not all(names):
        raise _NotAggregatable("the backend drops __name__ from last_over_time")
    return names


def _drop(task: asyncio.Task) -> None:
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: no "never retrieved" warning for an answer nobody took
    task.cancel()


def resource_labels(labels: Sequence[str], converters: Sequence[ResourceConverter]) -> list[str]:
    """The labels of a seriesQuery's series that name a resource under some rule of that query."""
    return [label for label in labels if label != "__name__"
            and any(c.resource_for_label(label) is not None for c in converters)]


def to_ask(required: frozenset[str], labels: Sequence[str]) -> list[str]:
    """The resource labels for which Prometheus is asked which names carry them: not those the
    seriesQuery itself requires (`required`, its `required_labels`), which every name it lists carries."""
    return [label for label in labels if label not in required]


def carrying(query: str, label: str) -> str:
    """The selector of `query`'s series that carry `label`."""
    selector = with_matcher(query, f'{label}!=""')
    if selector is None:
        raise _NotAggregatable("not a plain series selector")
    return selector


class FirstQuestions:
    """The first relist's questions, asked when the adapter starts: each seriesQuery's fresh names
    and label names, and which names carry each label that names a resource, so that Prometheus
    answers them while the adapter connects to the cluster, compiles its rules and imports its
    server. Which labels name resources is read from `guess`, the rules compiled against the
    built-in table: the first relist takes the answers for the labels the cluster's table
    confirms and asks for the others itself; `cancel` drops what no relist took."""

    def __init__(self, prometheus: PrometheusClient, guess: CompiledRules, max_age: float | None,
                 relist_interval: float) -> None:
        max_age = effective_max_age(max_age, relist_interval)
        start = time.time() - max_age if max_age else None
        self._tasks: dict[tuple[str, str], asyncio.Task] = {}
        for query in dict.fromkeys(r.series_query for r in guess.all):
            if with_matcher(query, 'x=""') is None:
                continue  # not a plain selector: listed exactly, not aggregated
            self._tasks[(query, "names")] = asyncio.create_task(fresh_names(prometheus, query, start, max_age))
            labels = self._tasks[(query, "labels")] = asyncio.create_task(prometheus.labels(query, start))
            converters = [r.converter for r in guess.rules if r.series_query == query]
            self._tasks[(query, "carrying")] = asyncio.create_task(
                self._carrying(prometheus, query, labels, converters, start))

    @staticmethod
    async def _carrying(prometheus: PrometheusClient, query: str, labels: asyncio.Task,
                        converters: list[ResourceConverter], start: float | None) -> dict[str, asyncio.Task]:
        found = _strings(await labels, "labels")
        return {label: asyncio.create_task(prometheus.label_values("__name__", carrying(query, label), start))
                for label in to_ask(required_labels(query), resource_labels(found, converters))}

    def take(self, query: str, question: str) -> asyncio.Task | None:
        return self._tasks.pop((query, question), None)

    def cancel(self) -> None:
        for key, task in self._tasks.items():
            if key[1] == "carrying" and task.done() and not task.cancelled() and task.exception() is None:
                for asked in task.result().values():
                    _drop(asked)
            _drop(task)
        self._tasks.clear()


class Discovery:
    """Owns the rules and the catalogue; `start()` runs the relist and rules-file loops."""

    def __init__(self, rules: CompiledRules, prometheus: PrometheusClient, relist_interval: float,
                 max_age: float | None = None, rules_path: str | None = None, check_interval: float = 5.0,
                 metrics=None, aggregate: bool = False,
                 refresh_resources: Callable[[ResourceTable], Awaitable[ResourceTable]] | None = None,
                 also_reload: Callable[[RulesConfig, ResourceTable], Callable[[], None]] | None = None,
                 first: FirstQuestions | None = None) -> None:
        self.rules = rules
        self._first = first  # questions asked at start-up, answered for the first relist
        # the rest of a reloaded file (resourceRules): compiles it (RuleError: the file is invalid
        # as a whole) and returns what takes it into effect with the new rules
        self.also_reload = also_reload
        self.refresh_resources = refresh_resources  # cluster discovery, given the current table
        self._resources_read = time.monotonic()  # the table given was just read: the first relist reuses it
        self.aggregate = aggregate  # let Prometheus group series by name and resource labels
        self.prometheus = prometheus
        self.relist_interval = relist_interval
        self.max_age = effective_max_age(max_age, relist_interval)
        self.rules_path = Path(rules_path) if rules_path else None
        self.check_interval = check_interval
        self.metrics = metrics
        self.catalogue = Catalogue()
        self.synced = False  # a relist has completed with Prometheus reachable
        self.last_error: str | None = None
        self._last_good: dict[str, list[dict[str, str]]] = {}
        self._rules_digest = self._digest() if self.rules_path else None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._report_pending = True
        self.query_problems: list[str] = []
        self._warned: set[tuple[str, str]] = set()

    # -- relisting -----------------------------------------------------------------------------
    async def relist(self) -> bool:
        """One discovery pass; True when every seriesQuery reached Prometheus."""
        started = time.perf_counter()
        await self._refresh_resources()
        rules = self.rules
        queries = list(dict.fromkeys(r.series_query for r in rules.all))
        start = time.time() - self.max_age if self.max_age else None
        results = await asyncio.gather(*(self._timed_list(q, rules, start) for q in queries), return_exceptions=True)
        if self._first is not None:  # the start-up's questions serve the first relist only
            self._first.cancel()
            self._first = None
        reached, errors = True, []
        for query, result in zip(queries, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, PrometheusError):
                    raise result
                if not isinstance(result, PrometheusQueryError):
                    reached = False
                errors.append(f"seriesQuery {query!r}: {result}")
                if self.metrics:
                    self.metrics.relist_failures.inc()
            else:
                self._last_good[query] = result
        for stale in set(self._last_good) - set(queries):
            del self._last_good[stale]
        self.catalogue = build_catalogue(rules, self._last_good)  # the atomic swap
        self.last_error = "; ".join(errors) or None
        if errors:
            log.warning("discovery: %s (keeping the last good series for those rules)", self.last_error)
        if reached:
            self.synced = True
            if self._report_pending:  # at start and after a reload: what each rule serves, and its query checked
                self._report_pending = False
                rulecheck.log_summary(rulecheck.summarize(rules, self._last_good, self.catalogue))
                self.query_problems = await rulecheck.check_queries(rules, self.prometheus)
        if self.metrics:
            self.metrics.relist_seconds.observe(time.perf_counter() - started)
            self.metrics.series.set(self.catalogue.series_count)
            self.metrics.metrics.labels("custom").set(len(self.catalogue.custom))
            self.metrics.metrics.labels("external").set(len(self.catalogue.external))
            per_rule: dict[str, set[str]] = {r.rule.path: set() for r in rules.all}
            served: list[CustomMetric | ExternalMetric] = [*self.catalogue.custom.values(),
                                                            *self.catalogue.external.values()]
            for metric in served:
                per_rule.setdefault(metric.rule.rule.path, set()).add(metric.metric)
            self.metrics.rule_metrics.clear()
            for path, names in per_rule.items():
                self.metrics.rule_metrics.labels(path).set(len(names))
        return reached

    async def _timed_list(self, query: str, rules: CompiledRules, start: float | None) -> list[dict[str, str]]:
        """`_list`, timed into each rule that shares this seriesQuery."""
        started = time.perf_counter()
        try:
            return await self._list(query, rules, start)
        finally:
            if self.metrics:
                seconds = time.perf_counter() - started
                for rule in rules.all:
                    if rule.series_query == query:
                        self.metrics.rule_discovery_seconds.labels(rule.rule.path).observe(seconds)

    async def _refresh_resources(self) -> None:
        """Re-read the cluster's resources; on failure keep the last table (and say so)."""
        if self.refresh_resources is None or time.monotonic() - self._resources_read < self.relist_interval / 2:
            return
        try:
            table = await self.refresh_resources(self.rules.resources)
        except Exception as exc:
            log.warning("refreshing the cluster's resources failed, keeping the last known ones: %s", exc)
            return
        self._resources_read = time.monotonic()
        if table != self.rules.resources:
            log.info("cluster resources changed: %d resources", len(table))
            self.rules = self.rules.with_resources(table)

    async def _list(self, query: str, rules: CompiledRules, start: float | None) -> list[dict[str, str]]:
        """The series of `query`, or with aggregation one stand-in per metric name that carries
        every resource label some series of that name has (values are not needed)."""
        started = time.perf_counter()
        if self.aggregate:
            try:
                found = await self._aggregated(query, rules, start)
                vlog(log, 6, "seriesQuery %r (%s): %d series names in %.1f ms", query, _paths(rules, query),
                     len(found), (time.perf_counter() - started) * 1000)
                return found
            except _NotAggregatable as exc:
                log.debug("seriesQuery %r: exact listing (%s)", query, exc)
            except PrometheusError as exc:
                if _unanswered(exc):  # the listing would get no answer either
                    raise
                self._warn_once(("aggregate", query), "seriesQuery %r (%s): the backend refused aggregated "
                                "discovery, listing its series instead (/api/v1/series): %s",
                                query, _paths(rules, query), exc)
        found = await self.prometheus.series(query, start)
        found = await self._fresh_series(query, rules, found)
        vlog(log, 6, "seriesQuery %r (%s): %d series in %.1f ms", query, _paths(rules, query), len(found),
             (time.perf_counter() - started) * 1000)
        return found

    def _warn_once(self, key: tuple[str, str], message: str, *args: object) -> None:
        """A backend's refusal is said once per seriesQuery at WARNING, then at -v=4 on each relist."""
        if key in self._warned:
            vlog(log, 4, message, *args)
        else:
            self._warned.add(key)
            log.warning(message, *args)

    async def _fresh_series(self, query: str, rules: CompiledRules,
                            series: list[dict[str, str]]) -> list[dict[str, str]]:
        """The listed series whose name has a sample within `--metrics-max-age` (the freshness
        of aggregated discovery, `_fresh_names`): `/api/v1/series` answers from the index, and
        VictoriaMetrics' index works by the day, so its `start` alone keeps a series stopped
        minutes ago. Not filtered when the seriesQuery is not a plain selector, or the freshness
        query fails (said once)."""
        if not self.max_age or not series or with_matcher(query, 'x=""') is None:
            return series
        try:
            fresh = set(await self._fresh_names(query, None))
        except _NotAggregatable as exc:
            log.debug("seriesQuery %r: --metrics-max-age not applied (%s)", query, exc)
            return series
        except PrometheusError as exc:  # the listing answered: serve it rather than nothing
            self._warn_once(("max-age", query), "seriesQuery %r (%s): the freshness query failed, "
                            "--metrics-max-age is not applied to its series: %s", query, _paths(rules, query), exc)
            return series
        return [labels for labels in series if labels.get("__name__") in fresh]

    async def _aggregated(self, query: str, rules: CompiledRules, start: float | None) -> list[dict[str, str]]:
        converters = [r.converter for r in rules.rules if r.series_query == query]
        carrying(query, "x")  # a plain selector, or nothing to aggregate
        required = required_labels(query)

        async def names_carrying() -> tuple[list[str], list[Any]]:
            # Which names carry each resource label needs only the label list: asked while the
            # freshness query (the slowest, it reads samples) still runs, not after it.
            labels = _strings(await self._asked(query, "labels", lambda: self.prometheus.labels(query, start)),
                              "labels")
            found = resource_labels(labels, converters)
            chain = self._first.take(query, "carrying") if self._first is not None else None
            asked: dict[str, asyncio.Task] = await chain if chain is not None else {}

            def ask(label: str) -> Awaitable[list[str]]:
                task = asked.pop(label, None)
                return task if task is not None else self.prometheus.label_values("__name__", carrying(query, label),
                                                                                 start)
            try:
                asking = to_ask(required, found)
                return asking, await asyncio.gather(*(ask(label) for label in asking))
            finally:
                for task in asked.values():  # guessed labels that name no resource in the cluster's table
                    _drop(task)

        names, (asked_about, carried) = await asyncio.gather(
            self._asked(query, "names", lambda: self._fresh_names(query, start)), names_carrying())
        carried_by_all = dict.fromkeys(resource_labels(sorted(required), converters), "")
        present: dict[str, dict[str, str]] = {name: {"__name__": name, **carried_by_all} for name in sorted(names)}
        for label, with_label in zip(asked_about, carried, strict=True):
            for name in _strings(with_label, "label values"):
                if name in present:
                    present[name][label] = ""
        return list(present.values())

    async def _asked(self, query: str, question: str, ask: Callable[[], Awaitable[Any]]) -> Any:
        """The answer FirstQuestions got at start-up, else asked now."""
        task = self._first.take(query, question) if self._first is not None else None
        return await (task if task is not None else ask())

    async def _fresh_names(self, query: str, start: float | None) -> list[str]:
        return await fresh_names(self.prometheus, query, start, self.max_age)

    async def _relist_loop(self) -> None:
        retry = 1.0
        if self.synced:  # the caller has just relisted: wait a full interval first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.relist_interval)
        while True:
            try:
                ok = await self.relist()
            except Exception:  # never let the loop die; the next pass may succeed
                log.exception("discovery pass failed")
                ok = False
            # Until the first success, retry quickly (with backoff) instead of waiting a full interval.
            delay = self.relist_interval if ok or self.synced else min(retry, self.relist_interval)
            retry = 1.0 if ok else min(retry * 2, 10.0)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    # -- rules file reload ---------------------------------------------------------------------
    def _read(self) -> bytes | None:
        try:
            return self.rules_path.read_bytes()  # type: ignore[union-attr]
        except OSError:
            return None

    def _digest(self) -> str | None:
        data = self._read()
        return hashlib.sha256(data).hexdigest() if data is not None else None

    def apply_rules_text(self, data: bytes | None) -> bool:
        """Take a new rules file content if it changed and is valid; True when it took effect."""
        if data is None:
            return False
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._rules_digest:
            return False
        self._rules_digest = digest
        try:
            config = parse_rules(data.decode("utf-8", "replace"), str(self.rules_path))
            rules = compile_rules(config, self.rules.resources)
            take_rest = self.also_reload(config, self.rules.resources) if self.also_reload else None
        except RuleError as exc:
            log.error("rules file %s changed but is invalid, keeping the previous rules: %s", self.rules_path, exc)
            if self.metrics:
                self.metrics.config_reloads.labels("invalid").inc()
            return False
        self.rules = rules
        if take_rest is not None:
            take_rest()
        log.info("rules file %s reloaded: %d rules, %d external rules", self.rules_path, len(rules.rules),
                 len(rules.external_rules))
        if self.metrics:
            self.metrics.config_reloads.labels("success").inc()
        self._report_pending = True
        self._wake.set()  # relist now with the new rules
        return True

    async def _watch_rules_loop(self) -> None:
        """A new content is taken once two checks in a row read it: a file caught in the middle of a
        non-atomic write (an editor truncating, then writing) is never applied. A ConfigMap volume
        is swapped atomically; a file edited in place is not."""
        seen: bytes | None = None
        while True:
            await asyncio.sleep(self.check_interval)
            try:
                data = await asyncio.to_thread(self._read)
                if data == seen:
                    self.apply_rules_text(data)
                seen = data
            except Exception:
                log.exception("checking the rules file failed")

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._relist_loop(), name="discovery-relist"))
        if self.rules_path:
            self._tasks.append(asyncio.create_task(self._watch_rules_loop(), name="discovery-rules-file"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
