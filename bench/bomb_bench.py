"""Benchmark: the adapter's memory under oversized Prometheus answers.

A stand-in Prometheus on loopback answers every metrics query with a gzip body of ~100 KB that
expands to 100 MB (a runaway query, a hostile or broken proxy). The adapter (a real process) is
asked by 6 requests at once; its resident memory (VmRSS now, VmHWM peak) is read from /proc
before and after, with the default `--prometheus-max-response-bytes` (16 MiB) and with the cap
raised past the body (what reading it whole costs). Writes bench/results/bomb.json.

    python bench/bomb_bench.py
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from kubesim.processes import AdapterProcess

BOMB = gzip.compress(b" " * (100 << 20), 9)
SERIES = json.dumps({"status": "success", "data": [{"__name__": "q_depth", "namespace": "web", "pod": "p"}]}).encode()
SCALAR = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}}).encode()
RULES = """rules:
- seriesQuery: 'q_depth{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


class _Bomb(BaseHTTPRequestHandler):
    def do_GET(self):
        bomb = "pod%3D" in self.path or 'pod="' in self.path
        body = SERIES if self.path.startswith("/api/v1/series") else BOMB if bomb else SCALAR
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if body is BOMB:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def run(extra: list[str]) -> dict:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bomb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rules = Path(tempfile.mkdtemp()) / "rules.yaml"
    rules.write_text(RULES)
    a = AdapterProcess("--prometheus-url", f"http://127.0.0.1:{server.server_port}", "--config", str(rules),
                       "--metrics-discovery", "series", "--query-cache-ttl", "0", *extra).wait_ready()
    try:
        pid = a.proc.pid
        before = _kib(pid, "VmRSS")
        with ThreadPoolExecutor(6) as pool:
            path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/p{}/q_depth"
            codes = list(pool.map(lambda i: httpx.get(a.url + path.format(i), timeout=120).status_code, range(6)))
        return {"args": extra, "codes": codes, "rss_before_mib": round(before / 1024, 1),
                "rss_after_mib": round(_kib(pid, "VmRSS") / 1024, 1),
                "peak_rss_mib": round(_kib(pid, "VmHWM") / 1024, 1)}
    finally:
        a.stop()
        server.shutdown()
        server.server_close()


def main() -> None:
    results = {"bomb_wire_bytes": len(BOMB), "bomb_decompressed_bytes": 100 << 20, "concurrent_requests": 6,
               "runs": [run([]), run(["--prometheus-max-response-bytes", str(1 << 30), "--prometheus-timeout", "60s"])]}
    out = Path(__file__).parent / "results" / "bomb.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
