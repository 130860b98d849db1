"""The adapter's command: flags -> settings -> components -> serve (run by `adapter.__main__`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import logging
import sys
from collections.abc import Callable

from adapter.discovery import Discovery, FirstQuestions, ResourceDiscoveryError, fetch_resource_table
from adapter.front import Front
from adapter.health import Health
from adapter.metricroutes import MetricRoutes, RequestMetrics
from adapter.naming import BUILTIN_TABLE, CompiledRules, compile_rules
from adapter.prometheus import PrometheusClient
from adapter.provider import CachePolicy, CustomMetricsProvider, ExternalMetricsProvider
from adapter.resourcemetrics import ResourceMetricsProvider, compile_resource_rules, reloader
from adapter.rules import RuleError, RulesConfig, load_rules
from adapter.selfmetrics import SelfMetrics
from adapter.server import SERVING_MODULES, SecurityUnavailable, check_security, serve
from adapter.settings import Settings, parse_settings
from promscaler import logs
from promscaler.kubeconfig import Source, kube_config, load_configuration, locate
from promscaler.logs import vlog

log = logging.getLogger("adapter")


def _fail(message: str) -> int:
    print(f"promscaler-adapter: {message}", file=sys.stderr, flush=True)
    return 1


def kube_source(settings: Settings) -> Source | None:
    """`--in-cluster` forces the service account; else the usual chain; None: no cluster (offline)."""
    return Source("in-cluster", None) if settings.in_cluster else locate(settings.kubeconfig)


# What serving imports (uvicorn), what a cluster connection does (the kubernetes client's asyncio
# half), and the FastAPI app (about half of what a start imports: imported once the adapter serves
# discovery and the metrics, so that its CPU does not delay them).
SERVING = SERVING_MODULES
KUBE = ("adapter.kube", kube_config)  # the client's kubeconfig loader, without its ApiClient
APP = ("adapter.app",)


def _import_in_turn(*groups: tuple[str | Callable[[], object], ...]) -> list[asyncio.Future]:
    """Import each group of modules (a name, or a function that imports) in turn on one worker thread,
    while the event loop sends the first questions and waits for Prometheus and the cluster: a future
    per group, done once it is imported. One thread, so that the first group (the one needed first)
    is not slowed by the next."""
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in groups]

    def settle(future: asyncio.Future, exc: BaseException | None) -> None:
        if not future.done():
            future.set_result(None) if exc is None else future.set_exception(exc)

    def work() -> None:
        for names, future in zip(groups, done, strict=True):
            failed: BaseException | None = None
            try:
                for name in names:
                    importlib.import_module(name) if isinstance(name, str) else name()
            except BaseException as exc:  # re-raised where the group is awaited
                failed = exc
            loop.call_soon_threadsafe(settle, future, failed)

    loop.run_in_executor(None, work)
    return done


async def run(settings: Settings, config: RulesConfig, builtin: CompiledRules | None = None) -> int:
    """Serve until stopped. `builtin`: the rules compiled against the built-in table, when they
    compile (connected to a cluster, the first relist's questions guess resource labels from them)."""
    metrics = SelfMetrics(process=True)
    prometheus = PrometheusClient(settings, metrics)
    labels = None
    server_import: asyncio.Future | None = None
    app_import: asyncio.Future | None = None
    relisted: asyncio.Task | None = None
    # The first relist's questions, asked now: Prometheus answers them while the adapter connects
    # to the cluster, compiles its rules and imports its server.
    first = (FirstQuestions(prometheus, builtin, settings.metrics_max_age, settings.metrics_relist_interval)
             if builtin is not None and settings.metrics_discovery == "aggregate" else None)
    try:
        # Connected to a cluster, rules name its resources (CRDs too) through API discovery, so
        # discovery comes before compiling the rules; offline the built-in table serves.
        resources, refresh = BUILTIN_TABLE, None
        source = kube_source(settings)
        if source is None:
            (server_import,) = _import_in_turn(SERVING)
            vlog(log, 1, "no Kubernetes configuration (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config): "
                 "built-in resource table, and labelSelector with '*' is unavailable")
        else:
            kube_import, server_import = _import_in_turn(KUBE, SERVING)
            await kube_import
            from adapter.kube import connect

            try:
                configuration, _ = await load_configuration(settings.kubeconfig, source=source)
                labels = await connect(configuration)
            except Exception as exc:  # a bad kubeconfig is a start-up error, said in one line
                return _fail(f"cannot use the Kubernetes configuration from {source}: {exc}")
            vlog(log, 1, "Kubernetes configuration from %s: %s", source, configuration.host)
            try:
                resources = await fetch_resource_table(labels.get_json)
            except ResourceDiscoveryError as exc:
                return _fail(f"cannot read the cluster's API discovery: {exc}")
            refresh = functools.partial(fetch_resource_table, labels.get_json)  # (current table) -> new table
        try:
            rules = builtin if builtin is not None and refresh is None else compile_rules(config, resources)
            resource_rules = compile_resource_rules(config.resource_rules, resources)
        except RuleError as exc:
            return _fail(f"invalid rules file {settings.config}: {exc}")
        resource = None
        if resource_rules is not None:
            if labels is None:
                log.warning("resourceRules are not served: metrics.k8s.io needs the cluster's pods and nodes "
                            "(start with --kubeconfig or --in-cluster)")
            else:
                resource = ResourceMetricsProvider(resource_rules, prometheus, labels, settings.query_cache_ttl)
                resource.start()  # the pod and node caches list while discovery does: neither waits for the other
        discovery = Discovery(rules, prometheus, settings.metrics_relist_interval, settings.metrics_max_age,
                              settings.config, settings.config_check_interval, metrics,
                              aggregate=settings.metrics_discovery == "aggregate", refresh_resources=refresh,
                              also_reload=reloader(resource), first=first)
        # the providers, the front and the probes are set up while Prometheus answers the first relist
        relisted = asyncio.create_task(discovery.relist())
        cache = CachePolicy(settings.query_cache_ttl, settings.query_refresh_ahead, settings.query_freshness)
        custom = (None if settings.disable_custom_metrics
                  else CustomMetricsProvider(discovery, prometheus, labels, cache))
        external = None if settings.disable_external_metrics else ExternalMetricsProvider(discovery, prometheus, cache)

        async def readiness() -> list[tuple[str, str | None]]:
            checks: list[tuple[str, str | None]] = []
            if not discovery.synced:
                checks.append(("prometheus", f"discovery has not succeeded yet: {discovery.last_error or 'waiting'}"))
            elif not await prometheus.cache.get(("readiness-probe",), 1.0, prometheus.ready):
                checks.append(("prometheus", f"Prometheus at {settings.prometheus_url} is unreachable"))
            else:
                checks.append(("prometheus", None))
            if resource is not None:  # metrics.k8s.io answers from the pod and node watch caches
                checks.append(("resource-caches", resource.unsynced()))
            return checks

        async def startup() -> None:
            discovery.start()

        async def shutdown() -> None:
            await discovery.stop()

        # Discovery's documents, the metric values and the probes are served as soon as discovery
        # has listed (adapter.front); the FastAPI app, for everything else, is imported and built meanwhile.
        front = Front(startup, shutdown)
        front.hot = RequestMetrics(MetricRoutes(front.fallback, custom, external), metrics)
        health = Health(readiness, settings.insecure)
        front.health = RequestMetrics(health, metrics)
        if not await relisted:
            if settings.fail_on_prometheus_unavailable:
                return _fail(f"Prometheus is unavailable: {discovery.last_error}")
            log.warning("Prometheus is unavailable, starting anyway (not ready until it answers): %s",
                        discovery.last_error)
        assert server_import is not None
        await server_import
        listening = asyncio.Event()

        async def build_app() -> None:
            nonlocal app_import
            await listening.wait()
            (app_import,) = _import_in_turn(APP)
            try:
                await app_import
                from adapter.app import create_app

                front.attach(create_app(settings, custom, external, readiness, metrics, resource=resource,
                                        hot=front.hot, health=health))
            except Exception as exc:  # then every request but the metrics APIs' fails, said once here
                log.error("cannot build the app: %s", exc, exc_info=exc)
                front.fail(exc)
            # Start-up ran without the collector (adapter.__main__): its objects (modules, rules, app,
            # the listing) are frozen out of the collector's full passes (steadier p99), with the few
            # thousand cyclic leftovers of imports, as gc.freeze's documented pattern keeps them; then
            # it runs again.
            gc.freeze()
            gc.enable()

        builder = asyncio.create_task(build_app())
        announce = asyncio.create_task(_announce_ready(listening, discovery, settings))
        try:
            await serve(settings, front, listening.set, metrics.registry)
        except (OSError, SecurityUnavailable) as exc:
            return _fail(str(exc))
        finally:
            announce.cancel()
            if not builder.done():
                builder.cancel()
                await asyncio.wait([builder])
        return 0
    finally:
        if relisted is not None and not relisted.done():  # a start-up that failed while it relisted
            relisted.cancel()
            await asyncio.wait([relisted])
        if first is not None:
            first.cancel()  # a start-up that failed before its first relist
        if app_import is not None and not app_import.done():
            await asyncio.wait([app_import])  # a failed start-up still lets the import finish
        await prometheus.aclose()
        if labels is not None:
            await labels.aclose()


async def _announce_ready(listening: asyncio.Event, discovery: Discovery, settings: Settings) -> None:
    """The one line that says the adapter is ready to serve (as `/readyz` does: the app may still be building)."""
    await listening.wait()
    while not discovery.synced:
        await asyncio.sleep(0.05)
    scheme = "http" if settings.insecure else "https"
    cat = discovery.catalogue
    print(f"promscaler-adapter ready: serving {scheme}://{settings.listen_host}:{settings.listen_port} "
          f"({len(cat.custom)} custom metrics, {len(cat.external)} external metrics)", flush=True)


def _runner() -> asyncio.Runner:
    """uvloop when installed (a faster event loop on the hot path), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    logs.setup(settings.verbosity, settings.log_format)
    if not settings.config:
        return _fail("--config is required (a prometheus-adapter rules file)")
    try:
        check_security(settings)
    except SecurityUnavailable as exc:
        return _fail(str(exc))
    builtin: CompiledRules | None = None
    try:
        config = load_rules(settings.config)
        if kube_source(settings) is None:  # offline: fail before starting anything (connected: after discovery)
            builtin = compile_rules(config)
            compile_resource_rules(config.resource_rules)
        else:
            with contextlib.suppress(RuleError):  # a rule may name a resource only the cluster has
                builtin = compile_rules(config)
    except RuleError as exc:
        return _fail(f"invalid rules file {settings.config}: {exc}")
    try:
        with _runner() as runner:
            return runner.run(run(settings, config, builtin))
    except KeyboardInterrupt:
        return 0
