"""CRUD, Status errors, optimistic concurrency, patches, subresources and selectors, through the
real `kubernetes` client, the dynamic client and kubectl."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver import KubeSim

from ..support import run_kubectl
from .kubesim_objects import deployment, pod

ROOT = Path(__file__).resolve().parents[2]
HAS = ("promscaler.io", "v1alpha1", "horizontalautoscalers")


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_get_and_status_errors(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) <= sim.resource_version
    assert core.read_namespaced_config_map("cfg", ns).data == {"a": "1"}

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}})
    body = status_of(exc.value)
    assert exc.value.status == 409
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "AlreadyExists", 409)
    assert body["details"] == {"name": "cfg", "group": "", "kind": "configmaps"}

    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("missing", ns)
    body = status_of(exc.value)
    assert (exc.value.status, body["reason"], body["message"]) == (404, "NotFound", 'configmaps "missing" not found')

    core.delete_namespaced_config_map("cfg", ns)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("cfg", ns)
    assert exc.value.status == 404
    assert sim.get("v1", "ConfigMap", ns, "cfg") is None


def test_bad_requests_are_status_objects(sim: KubeSim, ns: str) -> None:
    base = f"{sim.url}/api/v1/namespaces/{ns}/configmaps"
    r = httpx.post(base, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest" and "JSON" in r.json()["message"]
    r = httpx.post(base, json={"metadata": {}})
    assert r.status_code == 422 and r.json()["reason"] == "Invalid" and "metadata.name" in r.json()["message"]
    r = httpx.post(base, json={"metadata": {"name": "x", "namespace": "other"}})
    assert r.status_code == 400 and "namespace" in r.json()["message"]
    r = httpx.get(f"{base}?labelSelector=a%20in%20(", )
    assert r.status_code == 400 and r.json()["kind"] == "Status"
    r = httpx.get(f"{sim.url}/apis/nope.example.com/v1/things")
    assert r.status_code == 404 and r.json()["kind"] == "Status"


def test_generate_name(ns: str, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "cfg-"}})
    assert created.metadata.name.startswith("cfg-") and len(created.metadata.name) == len("cfg-") + 5


def test_delete_preconditions_and_the_audit_log(ns: str, api: client.ApiClient) -> None:
    """DeleteOptions.preconditions.resourceVersion as the apiserver checks it (409 when the object
    changed since), and the audit log of writes (audit.k8s.io/v1 Events at level Request)."""
    sim = KubeSim(ready_delay=0.0, audit=True).start()
    try:
        conf = sim.client_configuration()
        sim.tokens["token-alice"] = {"username": "alice", "groups": ["system:masters"]}
        conf.api_key = {"BearerToken": "token-alice"}
        with client.ApiClient(conf) as alice:
            leases = client.CoordinationV1Api(alice)
            body = {"metadata": {"name": "member", "labels": {"group": "g"}}, "spec": {"holderIdentity": "a"}}
            made = leases.create_namespaced_lease("default", body)
            stale = made.metadata.resource_version
            made.spec.holder_identity = "b"
            leases.replace_namespaced_lease("member", "default", made)
            with pytest.raises(ApiException) as exc:
                leases.delete_namespaced_lease("member", "default", body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(resource_version=stale)))
            assert exc.value.status == 409 and "ResourceVersion in precondition" in status_of(exc.value)["message"]
            fresh = leases.read_namespaced_lease("member", "default").metadata.resource_version
            leases.delete_namespaced_lease("member", "default", body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(resource_version=fresh)))
        assert sim.audit is not None
        got = [(e["verb"], e["user"]["username"], e["objectRef"]["resource"], e["objectRef"].get("name"),
                e["responseStatus"]["code"]) for e in sim.audit]
        assert got == [("create", "alice", "leases", "member", 201), ("update", "alice", "leases", "member", 200),
                       ("delete", "alice", "leases", "member", 409), ("delete", "alice", "leases", "member", 200)]
        assert sim.audit[0]["requestObject"]["spec"] == {"holderIdentity": "a"}
        assert KubeSim().audit is None  # off unless asked for
    finally:
        sim.stop()


def test_update_with_stale_resource_version_conflicts(ns: str, apps: client.AppsV1Api) -> None:
    first = apps.create_namespaced_deployment(ns, deployment("web"))
    assert first.metadata.generation == 1
    fresh = apps.read_namespaced_deployment("web", ns)
    fresh.spec.replicas = 0
    second = apps.replace_namespaced_deployment("web", ns, fresh)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert second.metadata.generation == 2

    first.spec.replicas = 5  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        apps.replace_namespaced_deployment("web", ns, first)
    body = status_of(exc.value)
    assert (exc.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 0


def test_patches(ns: str, core: client.CoreV1Api, api: client.ApiClient) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg", "labels": {"a": "1", "b": "2"}},
                                           "data": {"x": "1"}})
    # a dict body goes out as a strategic merge patch, treated as a merge patch
    out = core.patch_namespaced_config_map(
        "cfg", ns, {"metadata": {"labels": {"b": None, "c": "3"}}, "data": {"y": "2"}}
    )
    assert out.metadata.labels == {"a": "1", "c": "3"} and out.data == {"x": "1", "y": "2"}
    # a list body is a JSON patch
    out = core.patch_namespaced_config_map("cfg", ns, [{"op": "replace", "path": "/data/x", "value": "9"},
                                                       {"op": "remove", "path": "/data/y"}])
    assert out.data == {"x": "9"}
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_config_map("cfg", ns, [{"op": "test", "path": "/data/x", "value": "1"}])
    assert exc.value.status == 422
    out = core.patch_namespaced_config_map(
        "cfg", ns, {"data": {"z": "3"}}, _content_type="application/merge-patch+json"
    )
    assert out.data == {"x": "9", "z": "3"}


def test_strategic_merge_patch_merges_containers_by_name(ns: str, apps: client.AppsV1Api) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"] = [
        {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "side:1"}]
    apps.create_namespaced_deployment(ns, body)
    patch = {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
        "containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "$patch": "delete"}]},
                       {"name": "new", "image": "new:1"}]}}}}
    out = apps.patch_namespaced_deployment("web", ns, patch)  # a dict goes out as strategic merge patch
    containers = {c.name: c for c in out.spec.template.spec.containers}
    assert list(containers) == ["app", "sidecar", "new"]
    assert containers["app"].image == "app:2" and [(e.name, e.value) for e in containers["app"].env] == [("A", "1")]
    assert containers["sidecar"].image == "side:1"
    raw = apps.api_client.sanitize_for_serialization(out)
    assert not any(k.startswith("$") for k in raw["spec"]["template"]["spec"])
    merged = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:3"}]}}}}, _content_type="application/merge-patch+json")
    assert [c.name for c in merged.spec.template.spec.containers] == ["app"]  # a merge patch replaces lists


def test_status_subresource_semantics(ns: str, custom: client.CustomObjectsApi) -> None:
    body = {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler", "metadata": {"name": "has"},
            "spec": {"maxReplicas": 5}, "status": {"desiredReplicas": 99}}
    created = custom.create_namespaced_custom_object(*HAS[:2], ns, HAS[2], body)
    assert "status" not in created  # dropped on create: status belongs to the subresource
    assert created["metadata"]["generation"] == 1

    st = custom.patch_namespaced_custom_object_status(*HAS[:2], ns, HAS[2], "has",
                                                      {"status": {"desiredReplicas": 3}, "spec": {"maxReplicas": 50}})
    assert st["status"] == {"desiredReplicas": 3}
    assert st["spec"] == {"maxReplicas": 5}  # /status changes nothing else
    assert st["metadata"]["generation"] == 1  # and a status write is not a new generation

    obj = custom.get_namespaced_custom_object(*HAS[:2], ns, HAS[2], "has")
    obj["spec"]["maxReplicas"] = 7
    obj["status"] = {"desiredReplicas": 42}
    upd = custom.replace_namespaced_custom_object(*HAS[:2], ns, HAS[2], "has", obj)
    assert upd["spec"] == {"maxReplicas": 7} and upd["metadata"]["generation"] == 2
    assert upd["status"] == {"desiredReplicas": 3}  # the main endpoint ignores status

    stale = dict(upd, status={"desiredReplicas": 4})
    custom.replace_namespaced_custom_object_status(*HAS[:2], ns, HAS[2], "has", stale)
    with pytest.raises(ApiException) as exc:  # same resourceVersion again: now stale
        custom.replace_namespaced_custom_object_status(*HAS[:2], ns, HAS[2], "has", stale)
    assert exc.value.status == 409
    assert custom.get_namespaced_custom_object_status(*HAS[:2], ns, HAS[2], "has")["status"] == {"desiredReplicas": 4}


def test_custom_resources_refuse_strategic_merge_patch(sim: KubeSim, ns: str) -> None:
    sim.apply({"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
               "metadata": {"name": "h", "namespace": ns}, "spec": {}})
    url = f"{sim.url}/apis/promscaler.io/v1alpha1/namespaces/{ns}/horizontalautoscalers/h/status"
    r = httpx.patch(
        url, content=b'{"status": {"a": 1}}', headers={"content-type": "application/strategic-merge-patch+json"}
    )
    assert r.status_code == 415 and r.json()["reason"] == "UnsupportedMediaType"
    r = httpx.patch(url, content=b'{"status": {"a": 1}}', headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["status"] == {"a": 1}


def test_scale_subresource(sim: KubeSim, ns: str, apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment(ns, deployment("web", replicas=2, labels={"app": "web", "tier": "fe"}))
    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert scale.kind == "Scale" and scale.api_version == "autoscaling/v1"
    assert scale.spec.replicas == 2 and scale.status.selector == "app=web,tier=fe"
    out = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}})
    assert out.spec.replicas == 4
    dep = apps.read_namespaced_deployment("web", ns)
    assert dep.spec.replicas == 4 and dep.metadata.generation == 2
    scale = apps.read_namespaced_deployment_scale("web", ns)
    scale.spec.replicas = 1
    assert apps.replace_namespaced_deployment_scale("web", ns, scale).spec.replicas == 1
    scale.spec.replicas = 3  # resourceVersion of the earlier read is stale now
    with pytest.raises(ApiException) as exc:
        apps.replace_namespaced_deployment_scale("web", ns, scale)
    assert exc.value.status == 409
    r = httpx.patch(f"{sim.url}/apis/apps/v1/namespaces/{ns}/deployments/web/scale", json={"spec": {"replicas": -1}},
                    headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and "spec.replicas" in r.json()["message"]


def test_label_and_field_selectors(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    sim.apply(pod("a", {"app": "web", "tier": "fe"}, phase="Running", namespace=ns))
    sim.apply(pod("b", {"app": "web"}, phase="Pending", namespace=ns))
    sim.apply(pod("c", {"app": "db"}, phase="Running", namespace=ns))

    def names(**kw) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(ns, **kw).items]

    assert names() == ["a", "b", "c"]
    assert names(label_selector="app=web") == ["a", "b"]
    assert names(label_selector="app in (web,db),!tier") == ["b", "c"]
    assert names(field_selector="status.phase=Running") == ["a", "c"]
    assert names(field_selector="metadata.name!=a,status.phase=Running") == ["c"]
    assert [
        p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    ] == ["a", "b", "c"]
    page = core.list_namespaced_pod(ns, limit=2)
    assert [p.metadata.name for p in page.items] == ["a", "b"] and page.metadata._continue
    rest = core.list_namespaced_pod(ns, limit=2, _continue=page.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["c"] and not rest.metadata._continue


def test_delete_cascades_to_owned_pods(sim: KubeSim, ns: str) -> None:
    sim.apply(deployment("web", replicas=2, namespace=ns))
    owner = sim.get("apps/v1", "Deployment", ns, "web")
    sim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "owned", "namespace": ns, "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": owner["metadata"]["uid"]}]},
        "spec": {"containers": []}})
    sim.apply(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "free", "namespace": ns}, "spec": {"containers": []}}
    )
    sim.delete("apps/v1", "Deployment", ns, "web")
    assert sim.get("v1", "Pod", ns, "owned") is None
    assert sim.get("v1", "Pod", ns, "free") is not None
    sim.delete("v1", "Namespace", None, ns)
    assert sim.list("v1", "Pod", ns) == []


def test_discovery_and_dynamic_client(sim: KubeSim, ns: str, api: client.ApiClient) -> None:
    groups = {g["name"]: g for g in httpx.get(f"{sim.url}/apis").json()["groups"]}
    assert {"apps", "promscaler.io", "coordination.k8s.io", "metrics.k8s.io"} <= set(groups)
    assert groups["autoscaling"]["preferredVersion"]["version"] == "v2"
    apps_res = {r["name"]: r for r in httpx.get(f"{sim.url}/apis/apps/v1").json()["resources"]}
    assert apps_res["deployments/scale"]["kind"] == "Scale" and apps_res["deployments/scale"]["group"] == "autoscaling"
    assert "deployments/status" in apps_res and apps_res["deployments"]["namespaced"] is True
    core_res = {r["name"]: r for r in httpx.get(f"{sim.url}/api/v1").json()["resources"]}
    assert core_res["namespaces"]["namespaced"] is False and "pods/status" in core_res

    dc = dynamic.DynamicClient(api)
    deployments = dc.resources.get(api_version="apps/v1", kind="Deployment")
    assert "scale" in deployments.subresources  # a scaleTargetRef kind resolves to a resource with /scale
    has = dc.resources.get(api_version="promscaler.io/v1alpha1", kind="HorizontalAutoscaler")
    has.create(namespace=ns, body={"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
                                   "metadata": {"name": "x"}, "spec": {}})
    assert [o.metadata.name for o in has.get(namespace=ns).items] == ["x"]
    out = has.status.patch(namespace=ns, name="x", body={"status": {"currentReplicas": 2}},
                           content_type="application/merge-patch+json")
    assert out.status.currentReplicas == 2


def test_crd_registers_a_new_resource(sim: KubeSim, ns: str, api: client.ApiClient) -> None:
    sim.apply(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {
                            "status": {},
                            "scale": {
                                "specReplicasPath": ".spec.size",
                                "statusReplicasPath": ".status.size",
                                "labelSelectorPath": ".status.selector",
                            },
                        },
                    }
                ],
            },
        }
    )
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets",
                                           {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                            "spec": {"size": 2}})
    custom.patch_namespaced_custom_object_status("example.com", "v1", ns, "widgets", "w",
                                                 {"status": {"size": 2, "selector": "app=w"}})
    scale = custom.get_namespaced_custom_object_scale("example.com", "v1", ns, "widgets", "w")
    assert scale["spec"]["replicas"] == 2 and scale["status"] == {"replicas": 2, "selector": "app=w"}
    custom.patch_namespaced_custom_object_scale("example.com", "v1", ns, "widgets", "w", {"spec": {"replicas": 6}})
    assert custom.get_namespaced_custom_object("example.com", "v1", ns, "widgets", "w")["spec"]["size"] == 6
    sim.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "widgets.example.com")
    assert httpx.get(f"{sim.url}/apis/example.com/v1/namespaces/{ns}/widgets").status_code == 404


def kubectl(sim: KubeSim, *args: str) -> subprocess.CompletedProcess:
    return run_kubectl(sim.kubeconfig_path, *args)


def test_kubectl(sim: KubeSim, ns: str) -> None:
    sim.apply(pod("kp", phase="Running", namespace=ns))
    out = kubectl(sim, "get", "pods", "-A")
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split()[:3] == ["NAMESPACE", "NAME", "READY"]
    assert any(r.split()[:2] == [ns, "kp"] for r in rows)
    raw = kubectl(sim, "get", "--raw", f"/api/v1/namespaces/{ns}/pods/kp")
    assert raw.returncode == 0 and json.loads(raw.stdout)["metadata"]["name"] == "kp"
    out = kubectl(sim, "-n", ns, "get", "pod", "kp", "-o", "jsonpath={.status.phase}")
    assert out.stdout == "Running", out.stderr
    out = kubectl(sim, "-n", ns, "get", "pod", "missing")
    assert out.returncode != 0 and 'pods "missing" not found' in out.stderr


def test_kubectl_apply_scale_delete(sim: KubeSim, ns: str, tmp_path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: app, image: nginx}}]}}
---
apiVersion: promscaler.io/v1alpha1
kind: HorizontalAutoscaler
metadata: {{name: web, namespace: {ns}}}
spec: {{maxReplicas: 3}}
""")
    out = kubectl(sim, "apply", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert (
        "deployment.apps/web created" in out.stdout and "horizontalautoscaler.promscaler.io/web created" in out.stdout
    )
    out = kubectl(sim, "apply", "-f", str(manifest))
    assert "deployment.apps/web unchanged" in out.stdout, out.stderr
    out = kubectl(sim, "-n", ns, "scale", "deploy/web", "--replicas=2")
    assert out.returncode == 0, out.stderr
    assert sim.get("apps/v1", "Deployment", ns, "web")["spec"]["replicas"] == 2
    out = kubectl(sim, "-n", ns, "get", "has", "-o", "name")
    assert out.stdout.strip() == "horizontalautoscaler.promscaler.io/web", out.stderr
    out = kubectl(sim, "delete", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert sim.get("apps/v1", "Deployment", ns, "web") is None


def test_the_sandbox_serves_the_crd_manifest(sim: KubeSim, ns: str) -> None:
    """Without anything applied, the sandbox serves HorizontalAutoscalers as the CRD manifest declares
    them (apiservice/, what a real API server is given): its short names and printer columns."""
    crd = yaml.safe_load((ROOT / "apiservice" / "horizontalautoscaler-crd.yaml").read_text())
    names, [version] = crd["spec"]["names"], crd["spec"]["versions"]
    sim.apply({"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
               "metadata": {"name": "web", "namespace": ns}, "spec": {"minReplicas": 2, "maxReplicas": 7}})
    for short in names["shortNames"]:
        out = kubectl(sim, "-n", ns, "get", short)
        assert out.returncode == 0, out.stderr
        header, row = out.stdout.splitlines()
        assert header.split() == ["NAME"] + [c["name"].upper() for c in version["additionalPrinterColumns"]]
        starts = [header.index(h) for h in header.split()]  # cells by position: empty ones are blank
        cells = {h: row[a:b].strip() for h, a, b in zip(header.split(), starts, [*starts[1:], None], strict=True)}
        assert (cells["NAME"], cells["MINPODS"], cells["MAXPODS"]) == ("web", "2", "7")


def test_namespaces_are_created_on_demand_unless_strict(sim: KubeSim) -> None:
    r = httpx.post(f"{sim.url}/api/v1/namespaces/fresh-ns/configmaps", json={"metadata": {"name": "a"}})
    assert r.status_code == 201
    assert sim.get("v1", "Namespace", None, "fresh-ns")["status"]["phase"] == "Active"
    with KubeSim(strict_namespaces=True) as strict:
        r = httpx.post(f"{strict.url}/api/v1/namespaces/nowhere/configmaps", json={"metadata": {"name": "a"}})
        assert r.status_code == 404 and r.json()["message"] == 'namespaces "nowhere" not found'
        assert (
            httpx.post(
                f"{strict.url}/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "a"}}
            ).status_code
            == 201
        )
