"""Where the Kubernetes configuration comes from, in controller-runtime's order, for the adapter,
the controller and the demo: `--kubeconfig`, else `$KUBECONFIG`, else the in-cluster service
account, else `~/.kube/config`."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["SERVICE_ACCOUNT_DIR", "ConfigNotFound", "Source", "context_namespace", "in_cluster", "kube_config",
           "load_configuration", "locate"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigNotFound(Exception):
    """No configuration anywhere in the chain."""


@dataclass(frozen=True)
class Source:
    kind: str  # "flag", "env", "in-cluster", "home"
    path: str | None  # the kubeconfig file(s); None in-cluster

    def __str__(self) -> str:
        return {"flag": f"--kubeconfig {self.path}", "env": f"$KUBECONFIG={self.path}",
                "home": str(self.path)}.get(self.kind, "the in-cluster service account")


def _api_client(*args: Any, **kwargs: Any) -> Any:
    from kubernetes.aio.client.api_client import ApiClient

    return ApiClient(*args, **kwargs)


def kube_config() -> ModuleType:
    """The official client's kubeconfig loader, `kubernetes.aio.config.kube_config` (its package, with
    the in-cluster loader, imported with it), without importing its `ApiClient`.

    That module imports `ApiClient` at its top for `new_client_from_config*` alone, which promscaler
    never calls, and importing it imports pydantic and dateutil: 80-110 ms of CPU on a 2-core machine,
    on the adapter's and the controller's start (issue 28). While the module is imported the package's
    `ApiClient` is a stand-in that imports and builds the real one when called; it is removed
    afterwards, so later lookups go through the package's own lazy attribute."""
    name = "kubernetes.aio.config.kube_config"
    if name in sys.modules:
        return sys.modules[name]
    import kubernetes.aio.client as kclient

    package = vars(kclient)
    defer = "kubernetes.aio.client.api_client" not in sys.modules
    if defer:
        package["ApiClient"] = _api_client
    try:
        return importlib.import_module(name)
    finally:
        if defer and package.get("ApiClient") is _api_client:
            del package["ApiClient"]


def in_cluster(environ: Mapping[str, str] | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    """Running in a pod with its service account: the API server's address and the token."""
    environ = os.environ if environ is None else environ
    return bool(environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT")
                and (service_account_dir / "token").is_file())


def locate(kubeconfig: str | None, *, environ: Mapping[str, str] | None = None, home: Path | None = None,
           service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> Source | None:
    """The first configuration the chain finds, or None."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        return Source("flag", kubeconfig)
    if env.get("KUBECONFIG"):
        return Source("env", env["KUBECONFIG"])
    if in_cluster(env, service_account_dir):
        return Source("in-cluster", None)
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return Source("home", str(default))
    return None


def context_namespace(kubeconfig: str | None, context: str | None = None, *,
                      environ: Mapping[str, str] | None = None, home: Path | None = None,
                      service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str:
    """The namespace kubectl uses without `-n`: the (current or named) context's, in-cluster the
    service account's, else `default`. A configuration that cannot be read gives `default`: loading
    it for the request then says what is wrong, in one line."""
    found = locate(kubeconfig, environ=environ, home=home, service_account_dir=service_account_dir)
    if found is None:
        return "default"
    if found.kind == "in-cluster":
        with contextlib.suppress(OSError):
            return (service_account_dir / "namespace").read_text().strip() or "default"
        return "default"
    assert found.path is not None
    if not any(Path(p).expanduser().is_file() for p in found.path.split(os.pathsep)):
        return "default"
    try:  # the client's own reading and merging of the file(s), so the context is the one load_configuration uses
        merged = kube_config().KubeConfigMerger(found.path).config.value
        name = context or merged.get("current-context")
        chosen = next((c for c in merged.get("contexts") or () if c.value.get("name") == name), None)
        return str(((chosen.value if chosen else {}).get("context") or {}).get("namespace") or "default")
    except Exception:  # any unreadable file: reported in one line when the configuration is loaded
        return "default"


async def load_configuration(kubeconfig: str | None, context: str | None = None, *,
                             environ: Mapping[str, str] | None = None, home: Path | None = None,
                             service_account_dir: Path = SERVICE_ACCOUNT_DIR,
                             source: Source | None = None) -> tuple[Any, Source]:
    """A `kubernetes.aio` Configuration from the chain, and where it came from.

    Raises ConfigNotFound when nothing is configured, FileNotFoundError for a named file that is
    missing, and the client's own errors for a file it cannot use."""
    loader = kube_config()  # first: the in-cluster loader's package imports it
    from kubernetes.aio.client.configuration import Configuration
    from kubernetes.aio.config.incluster_config import InClusterConfigLoader

    env = os.environ if environ is None else environ
    found = source or locate(kubeconfig, environ=env, home=home, service_account_dir=service_account_dir)
    if found is None:
        raise ConfigNotFound("no Kubernetes configuration: pass --kubeconfig, set $KUBECONFIG, run in a cluster, "
                             "or create ~/.kube/config")
    cfg = Configuration()
    if found.kind == "in-cluster":
        InClusterConfigLoader(token_filename=str(service_account_dir / "token"),
                              cert_filename=str(service_account_dir / "ca.crt"),
                              environ=dict(env)).load_and_set(cfg)
        return cfg, found
    assert found.path is not None
    paths = found.path.split(os.pathsep)
    missing = [p for p in paths if not Path(p).expanduser().is_file()]
    if (found.kind == "flag" and missing) or len(missing) == len(paths):
        raise FileNotFoundError(f"{', '.join(missing)}: no such file")
    await loader.load_kube_config(config_file=found.path, context=context, client_configuration=cfg)
    return cfg, found
