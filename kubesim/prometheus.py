"""A real Prometheus server (Debian's `prometheus`) on a free loopback port, with its own
temporary data directory: for tests, the demo and the benchmarks.

Data gets in either by scraping (`scrape_targets`) or by backfilling OpenMetrics text with
`promtool tsdb create-blocks-from openmetrics` before start (`backfill`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import yaml

from kubesim.net import free_port, wait_http
from kubesim.processes import TempDirServer


def prometheus_binary() -> str:
    for name in ("prometheus",):
        path = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if path:
            return path
    raise FileNotFoundError("prometheus is not installed: run `apt-get install -y prometheus`")


def promtool_binary() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool" if os.path.exists("/usr/bin/promtool") else None)
    if not path:
        raise FileNotFoundError("promtool is not installed: run `apt-get install -y prometheus`")
    return path


def backfill(openmetrics: str, data_dir: str | Path, max_block_duration: str | None = None) -> None:
    """Write OpenMetrics text (ending in `# EOF`) as TSDB blocks into `data_dir`; promtool reads the
    text once per block, so weeks of history go faster in blocks longer than its 2h (`"24h"`)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".om", delete=False) as f:
        f.write(openmetrics if openmetrics.rstrip().endswith("# EOF") else openmetrics.rstrip() + "\n# EOF\n")
        src = f.name
    try:
        proc = subprocess.run(
            [promtool_binary(), "tsdb", "create-blocks-from", "openmetrics",
             *([f"--max-block-duration={max_block_duration}"] if max_block_duration else []), src, str(data_dir)],
            capture_output=True, text=True, timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"promtool backfill failed: {proc.stderr.strip() or proc.stdout.strip()}")
    finally:
        os.unlink(src)


class PrometheusServer(TempDirServer):
    """Start with `start()` (or as a context manager); `url` is the base URL to query.

    `scrape_targets`: `host:port` strings scraped every `scrape_interval` as job `sandbox`.
    `route_prefix`: serve under a path prefix (as Thanos/Mimir deployments do).
    `web_config`: a Prometheus `--web.config.file` document (basic auth, TLS).
    """

    def __init__(
        self,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "1s",
        data_dir: str | Path | None = None,
        route_prefix: str | None = None,
        web_config: dict | None = None,
        extra_scrape_configs: Iterable[dict] = (),
        extra_args: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        super().__init__("promscaler-prom-")
        self.data_dir = Path(data_dir) if data_dir else self.dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.route_prefix = "/" + route_prefix.strip("/") if route_prefix else ""
        self.web_config = web_config
        self.scrape_targets = list(scrape_targets)
        self.scrape_interval = scrape_interval
        self.extra_scrape_configs = list(extra_scrape_configs)
        self.extra_args = list(extra_args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.route_prefix}"

    def _config(self) -> dict:
        scrape = list(self.extra_scrape_configs)
        if self.scrape_targets:
            scrape.insert(0, {"job_name": "sandbox", "static_configs": [{"targets": self.scrape_targets}]})
        return {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": scrape,
        }

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        """Start the server (a no-op when it runs already, so `with server.start():` is safe)."""
        if self.running:
            return self
        config_path = self.dir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(self._config()))
        args = [
            prometheus_binary(),
            f"--config.file={config_path}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=3650d",
            "--web.enable-admin-api",
            "--log.level=warn",
            *self.extra_args,
        ]
        if self.route_prefix:
            args += [f"--web.route-prefix={self.route_prefix}", f"--web.external-url=http://127.0.0.1:{self.port}{self.route_prefix}"]
        if self.web_config is not None:
            web_path = self.dir / "web.yml"
            web_path.write_text(yaml.safe_dump(self.web_config))
            args.append(f"--web.config.file={web_path}")
        with open(self.dir / "prometheus.log", "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            wait_http(f"{self.url}/-/ready", timeout=timeout, ok=lambda r: r.status_code in (200, 401))
        except TimeoutError:
            self.stop()
            raise RuntimeError(
                f"prometheus did not start: {(self.dir / 'prometheus.log').read_text()[-2000:]}"
            ) from None
        return self


def start_backfilled(openmetrics: str, max_block_duration: str | None = None, **kwargs) -> PrometheusServer:
    """A started server whose TSDB already holds `openmetrics` (backfilled before start, see
    `backfill`); `kwargs` go to `PrometheusServer`. Close it with `close()` or use it in a `with` block."""
    server = PrometheusServer(**kwargs)
    try:
        backfill(openmetrics, server.data_dir, max_block_duration)
        return server.start()
    except BaseException:
        server.close()
        raise
