"""Custom resources in rules (issue: prometheus-adapter configs naming CRDs): connected to a cluster
the adapter resolves `resources.overrides`/`resources.template` through API discovery.

Real parts: KubeSim serving a `rollouts.argoproj.io` CRD, a real Prometheus backfilled with this
file's series, the adapter as a subprocess with `--kubeconfig`; plus unit tests of the discovery
parser and the resource table."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from adapter.discovery import ResourceDiscoveryError, fetch_resource_table
from adapter.naming import BUILTIN_TABLE, ResourceTable, compile_rules, normalize_resource
from adapter.rules import RuleError, parse_rules
from kubesim.apiserver import KubeSim
from kubesim.prometheus import PrometheusServer, start_backfilled
from promscaler.apidiscovery import AGGREGATED_ACCEPT, parse_resource_list, preferred_group_versions, preferred_versions
from promscaler.wire import CUSTOM_GROUP, EXTERNAL_GROUP

from ..support import discovery_requests
from .conftest import AdapterProcess, PromQL, StubAPI, approx, run_adapter, serving

STEP = 15
COUNTERS = {  # (namespace, rollout) -> per-second rate
    ("web", "checkout"): 2.0,
    ("web", "cart"): 0.5,
    ("web", "gone"): 7.0,  # series only: no Rollout object of that name
    ("shop", "checkout"): 3.0,
}
GAUGES = [  # (series, labels, value)
    ("rollout_queue_depth", {"namespace": "web", "kube_argoproj_io_rollout": "checkout"}, 12.0),
    ("deployment_queue_depth", {"namespace": "web", "kube_apps_deployment": "frontend"}, 5.0),
    ("widget_queue_depth", {"namespace": "web", "kube_example_com_widget": "w1"}, 3.0),
]
PODS = {"web-1": 1.5, "web-2": 4.0}

RULES = """
rules:
- seriesQuery: 'rollout_requests_total{namespace!="",rollout!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      rollout: {group: argoproj.io, resource: rollout}
  name: {matches: "^(.*)_total$", as: "${1}"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~".*_queue_depth",namespace!=""}'
  resources:
    template: "kube_<<.Group>>_<<.Resource>>"
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'pod_hits_total{namespace!="",pod!=""}'
  resources:
    template: "<<.Resource>>"
  name: {matches: "^(.*)_total$", as: "${1}"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
"""
ROLLOUT_RULE_TEMPLATE = """
rules:
- seriesQuery: 'rollout_requests_total{namespace!="",rollout!=""}'
  resources:
    template: "<<.Resource>>"
  name: {matches: "^(.*)_total$", as: "${1}"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
"""
CM = "/apis/custom.metrics.k8s.io"


def crd(group: str, plural: str, kind: str, version: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"scale": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def rollout(ns: str, name: str, **labels: str) -> dict:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"replicas": 1}}


def openmetrics(now: float | None = None) -> str:
    now = int(now or time.time())
    ts = range(now - 1800, now + 1801, STEP)
    lines = ["# TYPE rollout_requests counter"]
    for (ns, name), rate in COUNTERS.items():
        lines += [f'rollout_requests_total{{namespace="{ns}",rollout="{name}"}} {rate * (t - ts[0])} {t}' for t in ts]
    lines.append("# TYPE pod_hits counter")
    for pod, rate in PODS.items():
        lines += [f'pod_hits_total{{namespace="web",pod="{pod}"}} {rate * (t - ts[0])} {t}' for t in ts]
    for series, labels, value in GAUGES:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines += [f"# TYPE {series} gauge"] + [f"{series}{{{body}}} {value} {t}" for t in ts]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    p = start_backfilled(openmetrics())
    yield p
    p.close()


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim() as s:
        s.apply(crd("argoproj.io", "rollouts", "Rollout", "v1alpha1"))
        s.apply(rollout("web", "checkout", app="shop", track="stable"))
        s.apply(rollout("web", "cart", app="shop", track="canary"))
        s.apply(rollout("shop", "checkout", app="shop", track="stable"))
        yield s


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("crd") / "rules.yaml"
    path.write_text(RULES)
    return str(path)


@pytest.fixture(scope="module")
def adapter(prom, sim, rules_file) -> Iterator[AdapterProcess]:
    a = AdapterProcess("--prometheus-url", prom.url, "--config", rules_file, "--kubeconfig", sim.kubeconfig_path,
                       "--query-cache-ttl", "0", "--metrics-relist-interval", "1s",
                       "--metrics-max-age", "1m").wait_ready()  # samples every 15s
    yield a
    a.stop()


def discovered(adapter: AdapterProcess, version: str) -> set[str]:
    resp = adapter.get(f"{CM}/{version}")
    assert resp.status_code == 200, resp.text
    return {r["name"] for r in resp.json()["resources"]}


# -- through the adapter process ----------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_overrides_and_templates_discover_custom_resources(adapter, version):
    names = discovered(adapter, version)
    assert "rollouts.argoproj.io/rollout_requests" in names  # overrides {group: argoproj.io, resource: rollout}
    assert "rollouts.argoproj.io/rollout_queue_depth" in names  # template kube_argoproj_io_rollout
    assert "deployments.apps/deployment_queue_depth" in names and "pods/pod_hits" in names
    assert not any(n.startswith("widgets.") for n in names)  # no such CRD (yet)


def test_one_rollout_answers_with_its_kind_and_api_version(adapter, prom):
    resp = adapter.get(f"{CM}/v1beta2/namespaces/web/rollouts.argoproj.io/checkout/rollout_requests")
    assert resp.status_code == 200, resp.text
    [item] = resp.json()["items"]
    assert item["describedObject"] == {"kind": "Rollout", "apiVersion": "argoproj.io/v1alpha1",
                                       "name": "checkout", "namespace": "web"}
    expected = PromQL(prom.url).by('sum(rate(rollout_requests_total{namespace="web",rollout="checkout"}[1m])) '
                                   'by (rollout)', "rollout")
    assert approx(item["value"], expected["checkout"])
    v1 = adapter.get(f"{CM}/v1beta1/namespaces/shop/rollouts.argoproj.io/checkout/rollout_requests").json()
    assert v1["items"][0]["metricName"] == "rollout_requests"
    assert v1["items"][0]["describedObject"]["apiVersion"] == "argoproj.io/v1alpha1"
    assert approx(v1["items"][0]["value"], PromQL(prom.url).by(
        'sum(rate(rollout_requests_total{namespace="shop",rollout="checkout"}[1m])) by (rollout)',
        "rollout")["checkout"])


def test_template_resource_value(adapter, prom):
    resp = adapter.get(f"{CM}/v1beta2/namespaces/web/rollouts.argoproj.io/checkout/rollout_queue_depth")
    assert resp.status_code == 200, resp.text
    [item] = resp.json()["items"]
    expected = PromQL(prom.url).vector('sum(rollout_queue_depth{namespace="web",kube_argoproj_io_rollout="checkout"})')
    assert item["describedObject"]["kind"] == "Rollout" and approx(item["value"], expected[0][1])


@pytest.mark.parametrize("selector,expected", [
    ("app=shop", {"checkout", "cart"}),  # "gone" has a series but no Rollout object
    ("track=canary", {"cart"}),
    ("app=shop,track!=canary", {"checkout"}),
    ("app=other", set()),
])
def test_label_selector_answers_existing_matching_rollouts(adapter, prom, selector, expected):
    resp = adapter.get(f"{CM}/v1beta2/namespaces/web/rollouts.argoproj.io/%2A/rollout_requests",
                       params={"labelSelector": selector})
    assert resp.status_code == 200, resp.text
    got = {i["describedObject"]["name"]: i["value"] for i in resp.json()["items"]}
    assert set(got) == expected
    rates = PromQL(prom.url).by('sum(rate(rollout_requests_total{namespace="web"}[1m])) by (rollout)', "rollout")
    assert "gone" in rates and all(approx(got[n], rates[n]) for n in got)


def test_watch_sees_new_rollouts(adapter, sim):
    path = f"{CM}/v1beta2/namespaces/web/rollouts.argoproj.io/%2A/rollout_requests"
    sim.apply(rollout("web", "gone", app="shop"))
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = {i["describedObject"]["name"] for i in adapter.get(path, params={"labelSelector": "app=shop"})
                   .json()["items"]}
            if got == {"checkout", "cart", "gone"}:
                break
            time.sleep(0.1)
        assert got == {"checkout", "cart", "gone"}
    finally:
        sim.delete("argoproj.io/v1alpha1", "Rollout", "web", "gone")


def test_pods_and_deployments_unchanged(adapter, prom):
    pods = adapter.get(f"{CM}/v1beta2/namespaces/web/pods/web-2/pod_hits").json()["items"]
    assert pods[0]["describedObject"] == {"kind": "Pod", "apiVersion": "/v1", "name": "web-2", "namespace": "web"}
    assert approx(pods[0]["value"], PromQL(prom.url).by(
        'sum(rate(pod_hits_total{namespace="web",pod="web-2"}[1m])) by (pod)', "pod")["web-2"])
    dep = adapter.get(f"{CM}/v1beta2/namespaces/web/deployments.apps/frontend/deployment_queue_depth").json()["items"]
    assert dep[0]["describedObject"]["kind"] == "Deployment" and dep[0]["describedObject"]["apiVersion"] == "apps/v1"
    assert approx(dep[0]["value"], 5.0)
    # a custom resource the cluster does not serve is still unknown
    missing = adapter.get(f"{CM}/v1beta2/namespaces/web/gadgets.example.com/x/rollout_requests")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"


def test_crd_installed_later_is_picked_up_by_templates(adapter, sim):
    sim.apply(crd("example.com", "widgets", "Widget", "v1"))
    try:
        deadline = time.monotonic() + 15
        while "widgets.example.com/widget_queue_depth" not in discovered(adapter, "v1beta2") \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "widgets.example.com/widget_queue_depth" in discovered(adapter, "v1beta2")
        item = adapter.get(f"{CM}/v1beta2/namespaces/web/widgets.example.com/w1/widget_queue_depth").json()["items"][0]
        assert item["describedObject"]["apiVersion"] == "example.com/v1" and approx(item["value"], 3.0)
    finally:
        sim.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "widgets.example.com")


def test_without_a_cluster_an_unknown_override_is_a_one_line_hint(prom, rules_file):
    out = run_adapter("--insecure", "--port", "0", "--prometheus-url", prom.url, "--config", rules_file)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "rules[0].resources.overrides.rollout: unknown resource 'argoproj.io/rollout'" in lines[0]
    assert "--kubeconfig" in lines[0] and "--in-cluster" in lines[0]


def test_without_a_cluster_a_template_ignores_crd_labels(prom, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(ROLLOUT_RULE_TEMPLATE)
    with AdapterProcess("--prometheus-url", prom.url, "--config", str(rules)).wait_ready() as a:
        names = discovered(a, "v1beta2")
    assert "namespaces/rollout_requests" in names and not any(n.startswith("rollouts") for n in names)


def test_unreachable_cluster_is_a_one_line_start_up_error(prom, rules_file, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    out = run_adapter("--insecure", "--port", "0", "--prometheus-url", prom.url, "--config", rules_file,
                      "--kubeconfig", str(kubeconfig))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "API discovery" in lines[0] and "/api" in lines[0], out.stderr


# -- the pure parts ----------------------------------------------------------------------------

RESOURCE_LIST = {
    "kind": "APIResourceList", "groupVersion": "argoproj.io/v1alpha1",
    "resources": [
        {"name": "rollouts/scale", "namespaced": True, "group": "autoscaling", "version": "v1", "kind": "Scale"},
        {"name": "rollouts", "singularName": "rollout", "namespaced": True, "kind": "Rollout",
         "verbs": ["get", "list", "watch"]},
        {"name": "rollouts/status", "namespaced": True, "kind": "Rollout"},
        {"name": "analysisruns", "singularName": "", "namespaced": True, "kind": "AnalysisRun"},
        {"name": "broken", "namespaced": False},  # no kind: not a resource
    ],
}


def test_parse_resource_list_records_subresources():
    got = parse_resource_list(RESOURCE_LIST)
    assert [(r.group, r.version, r.name, r.singular, r.kind) for r in got] == [
        ("argoproj.io", "v1alpha1", "rollouts", "rollout", "Rollout"),
        ("argoproj.io", "v1alpha1", "analysisruns", "analysisrun", "AnalysisRun")]
    assert got[0].subresources == {"scale", "status"} and got[1].subresources == frozenset()
    assert got[0].namespaced and got[0].verbs == ("get", "list", "watch")
    assert got[0].group_version == "argoproj.io/v1alpha1"
    core = parse_resource_list({"groupVersion": "v1", "resources": [{"name": "nodes", "kind": "Node"}]})
    assert core[0].group == "" and core[0].group_version == "v1" and not core[0].namespaced


def test_preferred_versions_skips_malformed_entries_as_the_legacy_parser_does():
    """An entry that is not an object (a resource, its responseKind) is skipped, not a crash."""
    doc = {"items": [{"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
        "deployments", {"resource": "jobs", "responseKind": "Job"},
        {"resource": "deployments", "responseKind": {"kind": "Deployment"}, "scope": "Namespaced"}]}]}]}
    [apps] = preferred_versions(doc)
    assert [(r.name, r.kind, r.singular, r.namespaced) for r in apps.resources] == [
        ("deployments", "Deployment", "deployment", True)]
    assert parse_resource_list({"groupVersion": "apps/v1", "resources": ["deployments"]}) == []


def test_preferred_group_versions():
    doc = {"groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1"}], "preferredVersion": {"groupVersion": "apps/v1"}},
        {"name": "argoproj.io", "versions": [{"groupVersion": "argoproj.io/v1beta1"},
                                             {"groupVersion": "argoproj.io/v1alpha1"}],
         "preferredVersion": {"groupVersion": "argoproj.io/v1alpha1"}},
        {"name": "nopref", "versions": [{"groupVersion": "nopref/v2"}]},
    ]}
    assert preferred_group_versions(doc) == ["apps/v1", "argoproj.io/v1alpha1", "nopref/v2"]


CORE = {"groupVersion": "v1", "resources": [
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod"},
    {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace"}]}
GROUPS = {"groups": [
    {"name": g, "preferredVersion": {"groupVersion": gv}, "versions": [{"groupVersion": gv}]}
    for g, gv in [("metrics.k8s.io", "metrics.k8s.io/v1beta1"), ("argoproj.io", "argoproj.io/v1alpha1"),
                  ("custom.metrics.k8s.io", "custom.metrics.k8s.io/v1beta2")]]}
METRICS = {"groupVersion": "metrics.k8s.io/v1beta1", "resources": [
    {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics"}]}


LEGACY_API = {"kind": "APIVersions", "versions": ["v1"]}  # `/api` of a server without aggregated discovery


def fake_api(docs: dict, calls: list[str] | None = None):
    """A legacy-discovery server answering `docs` (path -> document); other paths fail."""
    docs = {"/api": LEGACY_API, **docs}

    async def get_json(path: str, accept: str = "application/json") -> dict:
        if calls is not None:
            calls.append(path)
        if path not in docs:
            raise RuntimeError(f"HTTP 503: {path} is unavailable")
        return docs[path]
    return get_json


async def test_fetch_resource_table_orders_core_first_and_skips_own_groups():
    calls: list[str] = []
    table = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": GROUPS,
                                                 "/apis/metrics.k8s.io/v1beta1": METRICS,
                                                 "/apis/argoproj.io/v1alpha1": RESOURCE_LIST}, calls))
    assert "/apis/custom.metrics.k8s.io/v1beta2" not in calls  # the adapter's own API: no objects
    assert table.normalize("", "pod").api_name == "pods"  # core first: not pods.metrics.k8s.io
    assert table.by_api_name("pods.metrics.k8s.io").kind == "PodMetrics"
    r = table.by_api_name("rollouts.argoproj.io")
    assert (r.kind, r.api_version, r.namespaced) == ("Rollout", "argoproj.io/v1alpha1", True)
    assert table.normalize("argoproj_io", "ROLLOUT") is r and table.normalize("", "Rollout") is r
    assert table.normalize("apps", "rollout") is None and table.by_api_name("deployments.apps") is None
    assert table.normalize("", "namespace").api_version == "/v1"

    # a group that fails later keeps its last known resources; without them it is left out
    again = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": GROUPS,
                                                 "/apis/metrics.k8s.io/v1beta1": METRICS}), table)
    assert again == table
    fresh = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": GROUPS,
                                                 "/apis/metrics.k8s.io/v1beta1": METRICS}))
    assert fresh.by_api_name("rollouts.argoproj.io") is None and fresh != table
    with pytest.raises(ResourceDiscoveryError, match="GET /apis: HTTP 503"):
        await fetch_resource_table(fake_api({"/api/v1": CORE}))


def test_builtin_table_is_the_default():
    assert BUILTIN_TABLE.normalize("", "Deployment") is normalize_resource("", "Deployment")
    assert BUILTIN_TABLE.normalize("apps", "deployment").api_version == "apps/v1"
    assert BUILTIN_TABLE.normalize("", "pods").api_version == "/v1"
    assert BUILTIN_TABLE.by_api_name("rollouts.argoproj.io") is None


async def test_rules_compile_against_a_table_and_templates_follow_refreshes():
    cfg = parse_rules(RULES)
    with pytest.raises(RuleError, match=r"rules\[0\]\.resources\.overrides\.rollout: .*--kubeconfig or --in-cluster"):
        compile_rules(cfg)
    core = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": {"groups": []}}))
    with pytest.raises(RuleError, match="not served by the cluster"):
        compile_rules(cfg, core)
    table = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": GROUPS,
                                                 "/apis/argoproj.io/v1alpha1": RESOURCE_LIST}))
    rules = compile_rules(cfg, table)
    assert rules.resources is table
    assert rules.rules[0].converter.resource_for_label("rollout").api_name == "rollouts.argoproj.io"
    template = rules.rules[1].converter
    assert template.resource_for_label("kube_example_com_widget") is None
    widgets = {"groupVersion": "example.com/v1",
               "resources": [{"name": "widgets", "kind": "Widget", "namespaced": True}]}
    newer = ResourceTable([*table.resources, *(r for r in (await fetch_resource_table(fake_api(
        {"/api/v1": {"resources": []}, "/apis": {"groups": [{"name": "example.com", "versions": [
            {"groupVersion": "example.com/v1"}]}]}, "/apis/example.com/v1": widgets}))).resources)])
    moved = rules.with_resources(newer)
    assert moved.resources is newer and moved.rules[0].converter.resource_for_label("rollout") is not None
    assert moved.rules[1].converter.resource_for_label("kube_example_com_widget").api_version == "example.com/v1"
    assert moved.rules[1].converter.label_for_resource(newer.by_api_name("rollouts.argoproj.io")) \
        == "kube_argoproj_io_rollout"
    assert rules.with_resources(table) is rules


async def test_a_failed_refresh_keeps_the_last_table(caplog):
    from adapter.discovery import Discovery

    table = await fetch_resource_table(fake_api({"/api/v1": CORE, "/apis": GROUPS,
                                                 "/apis/argoproj.io/v1alpha1": RESOURCE_LIST}))
    answers: list = [ResourceDiscoveryError("GET /api/v1: HTTP 503: down"), BUILTIN_TABLE]

    async def refresh(current: ResourceTable) -> ResourceTable:
        assert current is d.rules.resources
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    d = Discovery(compile_rules(parse_rules(ROLLOUT_RULE_TEMPLATE), table), None, relist_interval=60,  # type: ignore[arg-type]
                  refresh_resources=refresh)
    await d._refresh_resources()
    assert len(answers) == 2 and d.rules.resources is table  # the table it started with was just read: not read again
    d._resources_read -= 60  # a relist interval later
    await d._refresh_resources()
    assert d.rules.resources is table and "keeping the last known ones: GET /api/v1: HTTP 503" in caplog.text
    await d._refresh_resources()
    assert d.rules.resources is BUILTIN_TABLE
    assert d.rules.rules[0].converter.resource_for_label("rollout") is None  # the CRD went away


async def test_label_lookups_for_unsupported_core_resources_stay_a_clear_400(sim):
    from adapter.kube import LabelCache, client
    from promscaler.selectors import parse_selector
    from promscaler.status import BadRequest

    cache = LabelCache(client(sim.aio_client_configuration()))
    try:
        with pytest.raises(BadRequest, match="not supported for configmaps"):
            await cache.names(normalize_resource("", "configmap"), "web", parse_selector("app=shop"))
        table = await fetch_resource_table(cache.get_json)  # the real discovery documents, through the client
        rollouts = table.by_api_name("rollouts.argoproj.io")
        assert rollouts is not None and rollouts.api_version == "argoproj.io/v1alpha1"
        assert await cache.names(rollouts, "web", parse_selector("track=stable")) == {"checkout"}
        assert await cache.names(rollouts, "shop", parse_selector("app=shop")) == {"checkout"}
        assert await cache.names(rollouts, None, parse_selector("app=shop")) == {"checkout", "cart"}
    finally:
        await cache.aclose()


# -- aggregated discovery (apidiscovery.k8s.io/v2) against KubeSim ---------------------------------

@pytest.fixture
def logged_sim() -> Iterator[KubeSim]:
    """A cluster of its own with the Rollout CRD, logging every request."""
    with KubeSim(requests=True) as s:
        s.apply(crd("argoproj.io", "rollouts", "Rollout", "v1alpha1"))
        s.apply(rollout("web", "checkout", app="shop"))
        yield s


async def test_aggregated_discovery_reads_the_legacy_walks_table_in_two_requests(logged_sim):
    from adapter.kube import LabelCache, client

    sim = logged_sim
    cache = LabelCache(client(sim.aio_client_configuration()))
    try:
        aggregated = await fetch_resource_table(cache.get_json)
        assert sorted(discovery_requests(sim)) == ["/api", "/apis"]
        sim.aggregated_discovery = False  # a server without it answers the legacy documents: the walk
        seen = len(sim.requests)
        legacy = await fetch_resource_table(cache.get_json)
        walked = discovery_requests(sim, seen)
        groups = (await cache.get_json("/apis"))["groups"]
        # /api, /api/v1, /apis, then each group's preferred version but the adapter's own APIs
        assert len(walked) == 3 + len(groups) - sum(g["name"].endswith("custom.metrics.k8s.io") or
                                                    g["name"] == "external.metrics.k8s.io" for g in groups)
        assert "/apis/argoproj.io/v1alpha1" in walked and "/apis/apps/v1" in walked
        assert aggregated.resources == legacy.resources
        r = aggregated.by_api_name("rollouts.argoproj.io")
        assert r is not None and (r.kind, r.api_version, r.namespaced) == ("Rollout", "argoproj.io/v1alpha1", True)
        assert aggregated.normalize("", "pod").api_name == "pods"  # core first

        # the one parser: each group's preferred version reads the same resources, subresources and
        # verbs as its legacy APIResourceList
        sim.aggregated_discovery = True
        found = preferred_versions(await cache.get_json("/apis", accept=AGGREGATED_ACCEPT))
        sim.aggregated_discovery = False
        for v in found:
            assert set(v.resources) == set(parse_resource_list(await cache.get_json(f"/apis/{v.group_version}"),
                                                               v.group_version)), v.group_version
        by_name = {(r.group, r.name): r for v in found for r in v.resources}
        assert by_name[("apps", "deployments")].subresources == {"status", "scale"}
        assert by_name[("argoproj.io", "rollouts")].subresources == {"scale"}
    finally:
        await cache.aclose()


@pytest.mark.parametrize("aggregated", [True, False], ids=["aggregated", "legacy"])
def test_the_adapter_starts_with_two_discovery_requests(logged_sim, prom, rules_file, aggregated):
    sim = logged_sim
    sim.aggregated_discovery = aggregated
    a = AdapterProcess("--prometheus-url", prom.url, "--config", rules_file, "--kubeconfig", sim.kubeconfig_path,
                       "--metrics-max-age", "1m").wait_ready()
    try:
        assert "rollouts.argoproj.io/rollout_requests" in discovered(a, "v1beta2")  # the CRD, through discovery
        gets = discovery_requests(sim)
    finally:
        a.stop()
    if aggregated:
        assert sorted(gets) == ["/api", "/apis"]
    else:
        # the legacy walk: /api, /apis, the core version, then each group's preferred version as the
        # group list names it (read here as kubectl reads it), the metrics APIs' own left out
        listed = httpx.get(sim.url + "/apis", timeout=10).json()["groups"]
        walked = [f"/apis/{g['preferredVersion']['groupVersion']}" for g in listed
                  if g["name"] not in (CUSTOM_GROUP, EXTERNAL_GROUP)]
        assert {"/apis/argoproj.io/v1alpha1", "/apis/apps/v1"} <= set(walked)
        assert sorted(gets) == sorted(["/api", "/apis", "/api/v1", *walked])


async def test_a_stale_aggregated_api_keeps_its_known_resources(logged_sim):
    from adapter.kube import LabelCache, client

    widgets = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "example.com/v1",
               "resources": [{"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
                              "verbs": ["get", "list"]}]}

    class Backend(StubAPI):  # an aggregated API serving legacy discovery only
        def reply(self, url):
            return (200, widgets) if url.path == "/apis/example.com/v1" else (404, {})

    sim = logged_sim
    cache = LabelCache(client(sim.aio_client_configuration()))

    async def freshness() -> str:
        doc = await cache.get_json("/apis", accept=AGGREGATED_ACCEPT)
        return next(i for i in doc["items"] if i["metadata"]["name"] == "example.com")["versions"][0]["freshness"]

    try:
        with serving(Backend) as backend:
            sim.set_aggregated_api("example.com", f"http://127.0.0.1:{backend.server_port}", versions=("v1",))
            table = await fetch_resource_table(cache.get_json)
            assert sorted(discovery_requests(sim)) == ["/api", "/apis"]
            assert await freshness() == "Current"
        assert table.by_api_name("widgets.example.com").kind == "Widget"
        assert await freshness() == "Stale"  # the backend is gone: kubesim lists the version Stale, without resources
        kept = await fetch_resource_table(cache.get_json, table)
        assert kept.resources == table.resources
        assert (await fetch_resource_table(cache.get_json)).by_api_name("widgets.example.com") is None
    finally:
        await cache.aclose()
