"""Fixtures: one started KubeSim per test module (tests isolate themselves by namespace) and
real `kubernetes` clients pointed at it through its kubeconfig."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from kubesim.apiserver import KubeSim

_ns = itertools.count()


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(ready_delay=0.3, bookmark_interval=0.2) as s:
        yield s


@pytest.fixture
def ns(sim: KubeSim) -> str:
    """A fresh namespace per test."""
    name = f"t{next(_ns)}"
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def api(sim: KubeSim) -> Iterator[client.ApiClient]:
    """A sync ApiClient loaded from the kubeconfig file, as users load it."""
    conf = client.Configuration()
    config.load_kube_config(config_file=sim.kubeconfig_path, client_configuration=conf)
    with client.ApiClient(conf) as c:
        yield c


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
