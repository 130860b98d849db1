"""Series discovery: which metrics exist, refreshed in the background.

Every `--metrics-relist-interval` each distinct `seriesQuery` is asked once (rules sharing it
share the call); its series are filtered and named per rule, and the new `Catalogue` replaces
the old one in a single assignment, so a request sees either the old or the new one whole.
A failed `seriesQuery` keeps its own last good series; the others still refresh. The rules
file is re-read when it changes on disk, keeping the last good configuration when the new one
is invalid.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adapter.naming import CompiledRule, CompiledRules, Resource, compile_rules
from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusQueryError
from adapter.rules import RuleError, load_rules, parse_rules

__all__ = ["CustomMetric", "ExternalMetric", "Catalogue", "Discovery", "load_compiled"]

log = logging.getLogger("adapter.discovery")


@dataclass(frozen=True, slots=True)
class CustomMetric:
    resource: Resource
    metric: str
    series: str
    rule: CompiledRule


@dataclass(frozen=True, slots=True)
class ExternalMetric:
    metric: str
    series: str
    rule: CompiledRule


@dataclass(frozen=True)
class Catalogue:
    custom: Mapping[tuple[str, str], CustomMetric] = field(default_factory=dict)  # (resource api name, metric)
    external: Mapping[str, ExternalMetric] = field(default_factory=dict)
    series_count: int = 0


def load_compiled(path: str | Path) -> CompiledRules:
    """Read and compile a rules file; raises `RuleError` naming the rule index and field."""
    return compile_rules(load_rules(path))


def build_catalogue(rules: CompiledRules, series_by_query: Mapping[str, Sequence[Mapping[str, str]]]) -> Catalogue:
    """Pure: rules plus the series each seriesQuery returned -> the metrics served."""
    custom: dict[tuple[str, str], CustomMetric] = {}
    external: dict[str, ExternalMetric] = {}
    for rule in rules.all:
        for labels in series_by_query.get(rule.series_query, ()):
            name = labels.get("__name__", "")
            if not name or not rule.accepts(name):
                continue
            metric = rule.metric_name(name)
            if not metric:
                continue
            if rule.external:
                external.setdefault(metric, ExternalMetric(metric, name, rule))
                continue
            for res in rule.converter.resources_for_labels(labels):
                custom.setdefault((res.api_name, metric), CustomMetric(res, metric, name, rule))
    count = sum(len(v) for v in series_by_query.values())
    return Catalogue(custom, external, count)


class Discovery:
    """Owns the rules and the catalogue; `start()` runs the relist and rules-file loops."""

    def __init__(self, rules: CompiledRules, prometheus: PrometheusClient, relist_interval: float,
                 max_age: float | None = None, rules_path: str | None = None, check_interval: float = 5.0,
                 metrics=None) -> None:
        self.rules = rules
        self.prometheus = prometheus
        self.relist_interval = relist_interval
        self.max_age = max_age if max_age is not None else relist_interval
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

    # -- relisting -----------------------------------------------------------------------------
    async def relist(self) -> bool:
        """One discovery pass; True when every seriesQuery reached Prometheus."""
        started = time.perf_counter()
        rules = self.rules
        queries = list(dict.fromkeys(r.series_query for r in rules.all))
        start = time.time() - self.max_age if self.max_age else None
        results = await asyncio.gather(*(self.prometheus.series(q, start) for q in queries), return_exceptions=True)
        reached, errors = True, []
        for query, result in zip(queries, results):
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
        if self.metrics:
            self.metrics.relist_seconds.observe(time.perf_counter() - started)
            self.metrics.series.set(self.catalogue.series_count)
            self.metrics.metrics.labels("custom").set(len(self.catalogue.custom))
            self.metrics.metrics.labels("external").set(len(self.catalogue.external))
        return reached

    async def _relist_loop(self) -> None:
        retry = 1.0
        if self.synced:  # the caller has just relisted: wait a full interval first
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self.relist_interval)
            except asyncio.TimeoutError:
                pass
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
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass

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
            rules = compile_rules(parse_rules(data.decode("utf-8", "replace"), str(self.rules_path)))
        except RuleError as exc:
            log.error("rules file %s changed but is invalid, keeping the previous rules: %s", self.rules_path, exc)
            if self.metrics:
                self.metrics.config_reloads.labels("invalid").inc()
            return False
        self.rules = rules
        log.info("rules file %s reloaded: %d rules, %d external rules", self.rules_path, len(rules.rules),
                 len(rules.external_rules))
        if self.metrics:
            self.metrics.config_reloads.labels("success").inc()
        self._wake.set()  # relist now with the new rules
        return True

    async def _watch_rules_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval)
            try:
                self.apply_rules_text(await asyncio.to_thread(self._read))
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
