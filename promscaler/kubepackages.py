"""The kubernetes client's parent packages, left unexecuted in the adapter's process and the
autoscaler's commands' (adapter/__main__.py, autoscaler/__main__.py `lean`, the kubectl plugin).

`kubernetes/__init__.py` imports the synchronous client (its configuration: requests, urllib3,
oauthlib; its models: pydantic), its dynamic client (jsonschema, when kubernetes-validate is
installed), watch, stream and leader election, and `kubernetes/aio/__init__.py` their asyncio twins
(the asyncio ApiClient among them); these processes use only `kubernetes.aio.client`'s `rest` and
`configuration` and `kubernetes.aio.config` (promscaler.kubeapi, promscaler.kubeconfig). They were
~250 ms of the adapter's connected start, ~180 ms of CPU of the controller's and half of
`explain`'s 0.9 s on a 2-core machine (bench/adapter_bench.py --only startup_connected)."""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["LEAN_PACKAGES", "lean_packages"]

# `kubernetes/utils/__init__.py` imports its YAML creator and keepalive helpers (urllib3, ~100 ms);
# promscaler uses only `kubernetes.utils.quantity` (promscaler.quantity).
LEAN_PACKAGES = ("kubernetes", "kubernetes.aio", "kubernetes.utils")


def lean_packages(names: tuple[str, ...] = LEAN_PACKAGES) -> None:
    """Register each package as a module without running its `__init__`, so that importing one of
    its submodules (`kubernetes.aio.client.rest`) loads that submodule and what it imports, not
    every sibling. Submodules still import normally through the package's path. In order: finding
    `kubernetes.aio` goes through the `kubernetes` already registered. Only for a process's own
    entry: a caller that imported `kubernetes` itself expects its attributes (`kubernetes.config`)."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            continue  # not installed (offline use needs no client) or not a package
        sys.modules[name] = importlib.util.module_from_spec(spec)
