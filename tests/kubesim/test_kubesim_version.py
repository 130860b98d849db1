"""The release a KubeSim serves as (`/version`) and what differs with it: metadata.generation of
HorizontalPodAutoscalers (kube-apiserver sets it from 1.37, kubernetes#138228); a custom resource
with a status subresource keeps a generation as the API server does (the CRD documentation:
incremented on every change except to .metadata and .status)."""

from __future__ import annotations

import pytest
from kubernetes import client

from kubesim.apiserver import KubeSim

HAS = ("promscaler.io", "v1alpha1", "horizontalautoscalers")


def hpa(name: str, max_replicas: int) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": max_replicas}}


def test_version_is_1_37_by_default(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "37", "v1.37.0-kubesim")


def test_custom_resource_generation_counts_spec_changes_only(ns: str, custom: client.CustomObjectsApi) -> None:
    body = {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler", "metadata": {"name": "g"},
            "spec": {"maxReplicas": 5}}
    assert custom.create_namespaced_custom_object(*HAS[:2], ns, HAS[2], body)["metadata"]["generation"] == 1
    merge = {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "metadata only"}}}
    meta = custom.patch_namespaced_custom_object(*HAS[:2], ns, HAS[2], "g", merge)
    assert meta["metadata"]["labels"] == {"team": "a"} and meta["metadata"]["generation"] == 1
    st = custom.patch_namespaced_custom_object_status(*HAS[:2], ns, HAS[2], "g", {"status": {"desiredReplicas": 2}})
    assert int(st["metadata"]["resourceVersion"]) > int(meta["metadata"]["resourceVersion"])
    assert st["metadata"]["generation"] == 1
    spec = custom.patch_namespaced_custom_object(*HAS[:2], ns, HAS[2], "g", {"spec": {"maxReplicas": 6}})
    assert spec["metadata"]["generation"] == 2


def test_hpa_generation_from_1_37(ns: str, api: client.ApiClient) -> None:
    auto = client.AutoscalingV2Api(api)
    assert auto.create_namespaced_horizontal_pod_autoscaler(ns, hpa("web", 3)).metadata.generation == 1
    changed = auto.patch_namespaced_horizontal_pod_autoscaler("web", ns, {"spec": {"maxReplicas": 4}})
    assert changed.metadata.generation == 2
    labelled = auto.patch_namespaced_horizontal_pod_autoscaler("web", ns, {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.generation == 2


def test_a_1_36_cluster() -> None:
    with KubeSim(ready_delay=0.0, kube_version="1.36") as sim:
        api = client.ApiClient(sim.client_configuration())
        try:
            info = client.VersionApi(api).get_code()
            assert (info.major, info.minor, info.git_version) == ("1", "36", "v1.36.0-kubesim")
            auto = client.AutoscalingV2Api(api)
            assert auto.create_namespaced_horizontal_pod_autoscaler("default", hpa("web", 3)).metadata.generation \
                is None
            changed = auto.patch_namespaced_horizontal_pod_autoscaler("web", "default", {"spec": {"maxReplicas": 4}})
            assert changed.spec.max_replicas == 4 and changed.metadata.generation is None
        finally:
            api.close()


def test_a_malformed_version_is_refused() -> None:
    with pytest.raises(ValueError, match=r"kube_version: want MAJOR.MINOR such as 1.36, got '1.x'"):
        KubeSim(kube_version="1.x")
