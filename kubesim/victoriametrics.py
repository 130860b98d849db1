"""A real VictoriaMetrics (Debian's `victoria-metrics`, single-node) on a free loopback port, with
its own temporary data directory: the second backend of the tests, beside `kubesim.prometheus`.

Data gets in through its import API (`import_prometheus`: Prometheus text with millisecond
timestamps), made searchable at once by `/internal/force_flush`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

import httpx

from kubesim.net import free_port, wait_http
from kubesim.processes import TempDirServer


def victoriametrics_binary() -> str:
    path = shutil.which("victoria-metrics") or (
        "/usr/bin/victoria-metrics" if os.path.exists("/usr/bin/victoria-metrics") else None)
    if not path:
        raise FileNotFoundError("victoria-metrics is not installed: run `apt-get install -y victoria-metrics`")
    return path


class VictoriaMetricsServer(TempDirServer):
    """Start with `start()` (or as a context manager); `url` is the base URL to query.

    `extra_args`: more flags (`-search.maxUniqueTimeseries=5`, `-search.latencyOffset=1s`...).
    Stopped and started again (`stop()`, `start()`), it keeps its port and its data.
    """

    def __init__(self, extra_args: Sequence[str] = (), port: int | None = None) -> None:
        super().__init__("promscaler-vm-")
        self.port = port or free_port()
        self.extra_args = list(extra_args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> VictoriaMetricsServer:
        """Start the server (a no-op when it runs already) and wait until `/health` says OK."""
        if self.running:
            return self
        args = [
            victoriametrics_binary(),
            f"-storageDataPath={self.dir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-retentionPeriod=100y",
            "-loggerLevel=WARN",
            *self.extra_args,
        ]
        with open(self.dir / "victoria-metrics.log", "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            wait_http(f"{self.url}/health", timeout=timeout, ok=lambda r: r.status_code == 200)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"victoria-metrics did not start: {self.log()[-2000:]}") from None
        return self

    def log(self) -> str:
        return (self.dir / "victoria-metrics.log").read_text(errors="replace")

    def import_prometheus(self, text: str) -> None:
        """Write samples in Prometheus text format (`name{labels} value timestamp_ms` lines), then
        flush them, so that a query sent after this returns sees them."""
        resp = httpx.post(f"{self.url}/api/v1/import/prometheus", content=text.encode(), timeout=60)
        if resp.status_code != 204:
            raise RuntimeError(f"victoria-metrics import failed: HTTP {resp.status_code} {resp.text[:500]}")
        httpx.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()
