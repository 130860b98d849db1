"""`KubeSim`: an in-process Kubernetes API server over real HTTP on 127.0.0.1, for tests, the demo
and benchmarks. The real `kubernetes` client (sync and aio) and kubectl talk to it through
`kubeconfig_path`; tests and the demo also drive it directly through a thread-safe Python API.

    with KubeSim() as sim:
        sim.apply({"apiVersion": "apps/v1", "kind": "Deployment", ...})
        kubernetes.config.load_kube_config(sim.kubeconfig_path)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import shutil
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from kubesim.aggregation import Aggregator, PodUsage
from kubesim.cluster import Cluster
from kubesim.controllers import WorkloadController
from kubesim.fields import Filter
from kubesim.kubeconfig import aio_client_configuration, client_configuration, write_kubeconfig
from kubesim.reviews import AuthPolicy
from kubesim.routes import create_app
from kubesim.store import copy
from kubesim.views import KUBE_VERSION, parse_version
from promscaler.status import NotFound

__all__ = ["KubeSim"]

Obj = dict[str, Any]
ADMIN = {"username": "kubesim-admin", "uid": "kubesim-admin", "groups": ["system:masters"]}


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # leave Ctrl-C to the embedding program
        yield


class KubeSim:
    """The sandbox cluster. Options:

    - `token`: bearer token written into the kubeconfig (maps to an admin user in `tokens`);
    - `ready_delay`: seconds from pod start to Ready (the kubelet stand-in);
    - `history`: watch events kept for resumption; older resourceVersions get 410 Expired;
    - `bookmark_interval`: seconds between BOOKMARK events on watches that allow them;
    - `authenticate`: reject requests whose bearer token is not in `tokens` (401);
    - `strict_namespaces`: 404 on writes into a missing namespace (default: create it);
    - `metrics_api`: serve metrics.k8s.io from `set_pod_usage`;
    - `tls`: (certificate file, key file) to serve https, as a real API server does (in-cluster
      clients insist on it);
    - `tls_ca`: with `tls`, the CA file that signed its certificate: the kubeconfig names it
      (`certificate-authority`), so its clients verify the server as they verify a real cluster;
    - `client_ca`: with `tls`, a CA file: the TLS handshake requires a client certificate it signed
      (kube-apiserver's `--client-ca-file`, made mandatory; the certificate names no user: requests
      are authenticated by bearer token as without it);
    - `audit`: keep an audit log of writes in `audit` (audit.k8s.io/v1 Events at level Request:
      verb, user, objectRef, response code, times), as kube-apiserver's audit policy would;
    - `aggregated_discovery`: serve apidiscovery.k8s.io/v2 on `/api` and `/apis` to clients that
      ask for it (kube-apiserver 1.30+); off, a server with the legacy documents only;
    - `requests`: record each request's method and path in `requests` (e.g. to count discovery calls);
    - `kube_version`: the Kubernetes release it serves as (`/version`; before 1.37 HorizontalPodAutoscalers
      get no metadata.generation), 1.37 by default.
    """

    def __init__(self, token: str = "sandbox-token", *, ready_delay: float = 1.0, history: int = 10_000,
                 bookmark_interval: float = 5.0, authenticate: bool = False, strict_namespaces: bool = False,
                 metrics_api: bool = True, metrics_window: str = "30s", port: int = 0,
                 tls: tuple[str, str] | None = None, tls_ca: str | None = None, client_ca: str | None = None,
                 audit: bool = False, aggregated_discovery: bool = True, requests: bool = False,
                 kube_version: str = KUBE_VERSION) -> None:
        self.token = token
        self.kube_version = parse_version(kube_version)
        self.cluster = Cluster(history=history, strict_namespaces=strict_namespaces, metrics=metrics_api,
                               hpa_generation=self.kube_version >= (1, 37))
        self.policy = AuthPolicy(tokens={token: dict(ADMIN)})
        self.aggregator = Aggregator()
        self.usage = PodUsage(metrics_window)
        self.controller = WorkloadController(self.cluster, ready_delay)
        self.bookmark_interval = bookmark_interval
        self.authenticate = authenticate
        self.audit: list[Obj] | None = [] if audit else None
        self.aggregated_discovery = aggregated_discovery
        self.requests: list[tuple[str, str]] | None = [] if requests else None
        self.app = create_app(self)
        self._port = port
        self._tls = tls
        self._tls_ca = tls_ca
        self._client_ca = client_ca
        self._dir: Path | None = None  # holds the kubeconfig while serving
        self._server: _Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._serve_task: asyncio.Task | None = None
        self._controller_task: asyncio.Task | None = None
        self.url = ""
        self.kubeconfig_path = ""

    # --- lifecycle -------------------------------------------------------------------------

    def _bind(self) -> socket.socket:
        """Listen on the configured port, or on the one used before (a restart keeps the URL)."""
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on such sockets, and without it
        # every response waits ~40 ms for a delayed ACK (Nagle).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        sock.listen(512)
        self._port = sock.getsockname()[1]
        self.url = f"{'https' if self._tls else 'http'}://127.0.0.1:{self._port}"
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="kubesim-"))
        self.kubeconfig_path = str(write_kubeconfig(self._dir / "kubeconfig", self.url, self.token, self._tls_ca))
        return sock

    def _make_server(self) -> _Server:
        certfile, keyfile = self._tls if self._tls else (None, None)
        client_auth: dict[str, Any] = ({"ssl_ca_certs": self._client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
                                       if self._client_ca else {})
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=2, loop="asyncio", ssl_certfile=certfile, ssl_keyfile=keyfile,
                                **client_auth)
        return _Server(config)

    async def _serve(self, sock: socket.socket) -> None:
        assert self._server is not None
        self._loop = asyncio.get_running_loop()
        self._controller_task = asyncio.create_task(self.controller.run(), name="kubesim-controller")
        try:
            await self._server.serve(sockets=[sock])
        finally:
            self._controller_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._controller_task
            sock.close()

    def start(self) -> KubeSim:
        """Serve from a background thread with its own event loop; returns when it answers."""
        sock = self._bind()
        self._server = self._make_server()
        started = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._serve(sock))
            except BaseException as exc:  # surfaced by start()
                errors.append(exc)
            finally:
                started.set()

        self._thread = threading.Thread(target=run, name="kubesim", daemon=True)
        self._thread.start()
        while not started.wait(0.01):
            if self._server.started:
                break
        if errors or not self._server.started:
            raise RuntimeError(f"kubesim failed to start: {errors[0] if errors else 'unknown'}")
        return self

    async def astart(self) -> KubeSim:
        """Serve as a task in the caller's event loop (the demo)."""
        sock = self._bind()
        self._server = self._make_server()
        self._serve_task = asyncio.create_task(self._serve(sock), name="kubesim-server")
        while not self._server.started:
            if self._serve_task.done():
                self._serve_task.result()
                raise RuntimeError("kubesim stopped while starting")
            await asyncio.sleep(0.01)
        return self

    def _begin_shutdown(self) -> None:
        self.cluster.store.close_watchers()
        if self._server is not None:
            self._server.should_exit = True

    def stop(self) -> None:
        if self._thread is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._begin_shutdown)
            self._thread.join(timeout=15)
            self._thread = None
        self._loop = None
        self._remove_dir()

    async def astop(self) -> None:
        if self._serve_task is not None:
            self._begin_shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await self._serve_task
            self._serve_task = None
        self._loop = None
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> KubeSim:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    # --- clients ---------------------------------------------------------------------------

    def client_configuration(self):  # -> kubernetes.client.Configuration
        return client_configuration(self.url, self.token)

    def aio_client_configuration(self):  # -> kubernetes.aio.client.Configuration
        return aio_client_configuration(self.url, self.token)

    # --- the Python API (thread-safe) ------------------------------------------------------

    def apply(self, obj: Obj) -> Obj:
        """Create or replace any served object, status included; returns it as stored."""
        return copy(self.cluster.apply(obj))

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        obj = self.cluster.store.get(self.cluster.type(api_version, kind), namespace or "", name)
        return copy(obj) if obj is not None else None

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        items, _ = self.cluster.list(
            self.cluster.type(api_version, kind), Filter.parse(namespace, label_selector, None)
        )
        return copy(items)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """Delete (with garbage collection of dependents); None if it did not exist."""
        try:
            return copy(self.cluster.delete(self.cluster.type(api_version, kind), namespace or "", name))
        except NotFound:
            return None

    def set_pod_usage(self, namespace: str, pod: str, containers: dict[str, dict[str, str]] | None) -> None:
        """Container usage metrics.k8s.io reports for a pod (None forgets it)."""
        self.usage.set(namespace, pod, containers)

    def set_aggregated_api(
        self,
        group: str,
        url: str | None,
        versions: tuple[str, ...] | None = None,
        verify: str | bool = True,
        cert: tuple[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        """Proxy /apis/<group>/... to `url` (an APIService); None removes it. For an https
        backend, `verify` is its CA bundle and `cert` the front-proxy client (cert, key).
        A backend that does not answer within `timeout` seconds is a 503."""
        self.aggregator.set(group, url, versions, verify, cert, timeout)

    def break_watches(self) -> None:
        """End every open watch stream now (the server keeps running), as an apiserver restart
        or a dropped connection would; clients must resume from their last resourceVersion."""
        if self._loop is not None:
            self._in_loop(lambda: self.cluster.store.close_watchers(streams_only=True))

    def compact(self) -> None:
        """Drop the watch history: any resume from an older resourceVersion gets 410."""
        self.cluster.store.compact()

    @property
    def resource_version(self) -> int:
        return self.cluster.store.resource_version

    # --- auth policy -----------------------------------------------------------------------

    @property
    def tokens(self) -> dict[str, Obj]:
        return self.policy.tokens

    def allow(self, subject: str, verb: str = "*", group: str = "*", resource: str = "*") -> None:
        """Let a user or group do `verb` on `group`/`resource` (or a non-resource path, group "")."""
        self.policy.allow(subject, verb, group, resource)

    @property
    def fail_auth_reviews(self) -> bool:
        return self.policy.fail

    @fail_auth_reviews.setter
    def fail_auth_reviews(self, value: bool) -> None:
        self.policy.fail = value

    @property
    def review_counts(self) -> dict[str, int]:
        return dict(self.policy.counts)

    # --- hooks -----------------------------------------------------------------------------

    def subscribe(self, api_version: str, kind: str, callback: Callable[[str, Obj], None],
                  namespace: str | None = None, label_selector: str | None = None) -> Callable[[], None]:
        """Call `callback(event_type, obj)` in the server's loop for every later change (e.g. the
        demo observing pods come and go). `obj` must not be mutated. Returns an unsubscribe function."""
        if self._loop is None:
            raise RuntimeError("subscribe() needs a started KubeSim")
        t = self.cluster.type(api_version, kind)
        flt = Filter.parse(namespace, label_selector, None)
        loop = self._loop

        w = self._in_loop(
            lambda: self.cluster.store.watch(t, flt, str(self.cluster.store.resource_version), loop, callback)
        )
        return lambda: self.cluster.store.unwatch(w)

    def _in_loop(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` in the server's loop and return its result (directly when already there)."""
        loop = self._loop
        assert loop is not None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return fn()
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return fut.result(timeout=10)
