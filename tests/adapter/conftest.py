"""Real parts for the adapter tests: a real Prometheus loaded with the series of `data.py`, and
the adapter as a real subprocess (`python -m adapter --insecure --port P ...`) queried over HTTP."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kubesim.net import free_port
from kubesim.prometheus import PrometheusServer, backfill

sys.path.insert(0, str(Path(__file__).parent))
import data  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RULES = Path(__file__).parent / "rules.yaml"
PYTHON = sys.executable


class AdapterProcess:
    """`python -m adapter` on a free port; `wait_ready` waits for its one ready line."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="adapter-", suffix=".log", delete=False)
        self.args = [PYTHON, "-m", "adapter", "--insecure", "--port", str(self.port), *args]
        self.proc = subprocess.Popen(self.args, cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log, text=True)

    def wait_ready(self, timeout: float = 20.0) -> "AdapterProcess":
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else ""  # exactly one line when ready
        if "ready" not in line:
            raise RuntimeError(f"adapter did not get ready: {line!r}\n{self.stderr()}")
        return self

    def wait_listening(self, timeout: float = 20.0) -> "AdapterProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"adapter exited {self.proc.returncode}: {self.stderr()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"adapter not listening: {self.stderr()}")

    def stderr(self) -> str:
        return Path(self.log.name).read_text()

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, timeout=15, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
        os.unlink(self.log.name)


def run_adapter(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    """Run the adapter expecting it to exit (start-up failures)."""
    return subprocess.run([PYTHON, "-m", "adapter", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def start_prometheus(**kwargs) -> PrometheusServer:
    prom = PrometheusServer(**kwargs)
    backfill(data.openmetrics(), prom.data_dir)
    return prom.start()


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    prom = start_prometheus()
    yield prom
    prom.close()


@pytest.fixture(scope="session")
def adapter(prometheus: PrometheusServer) -> Iterator[AdapterProcess]:
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES)).wait_ready()
    yield a
    a.stop()


class PromQL:
    """Asks Prometheus directly: the independent source of expected values."""

    def __init__(self, url: str) -> None:
        self.url = url

    def vector(self, expr: str) -> list[tuple[dict[str, str], float]]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert body["status"] == "success", body
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def by(self, expr: str, label: str) -> dict[str, float]:
        return {m.get(label, ""): v for m, v in self.vector(expr)}


def approx(quantity: str, expected: float) -> bool:
    """An adapter quantity equals a Prometheus value (quantities are rounded up to milli-units)."""
    from promscaler.quantity import parse_quantity

    return abs(float(parse_quantity(quantity)) - expected) < 0.0011


@pytest.fixture(scope="session")
def promql(prometheus: PrometheusServer) -> PromQL:
    return PromQL(prometheus.url)
