"""Child processes of the sandbox: the real adapter (`python -m adapter`) on a loopback port,
waited for by its one ready line, and the real controller (`python -m autoscaler run`), waited
for on /readyz; always stopped. Tests, benchmarks and the demo share them."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import httpx

from kubesim.net import free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited after `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_answering(proc: subprocess.Popen, url: str, log: Callable[[], str], what: str, timeout: float) -> None:
    """Poll `url` until it answers 200; fail with the end of the process's log if it exits first
    or `timeout` seconds pass."""
    def gone() -> str | None:
        return None if proc.poll() is None else f"{what} exited {proc.returncode}: {log()[-3000:]}"

    try:
        wait_http(url, timeout, ok=lambda r: r.status_code == 200, gone=gone)
    except TimeoutError:
        raise TimeoutError(f"{what} not answering on {url}: {log()[-3000:]}") from None


class TempDirServer:
    """A child server with its own temporary directory (`dir`): `stop()` ends the process and keeps
    the directory (a later `start()` serves the same data), `close()` removes it too; as a context
    manager it is started on entry and closed on exit."""

    def __init__(self, prefix: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        self.dir = Path(self._tmp.name)
        self.proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> TempDirServer:
        raise NotImplementedError

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc, timeout=15)
        self.proc = None

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _LoggedProcess:
    """A child process of the project whose stderr goes to a log file, removed when it stops."""

    proc: subprocess.Popen
    log_path: str
    args: list[str]
    stop_timeout: float = 10.0

    def _start(self, prefix: str, cwd: str | Path, env: Mapping[str, str] | None, **popen: Any) -> None:
        with tempfile.NamedTemporaryFile("w+", prefix=prefix, suffix=".log", delete=False) as log:
            self.log_path = log.name
            self.proc = subprocess.Popen(self.args, cwd=cwd, stderr=log,
                                         env=None if env is None else {**os.environ, **env}, **popen)

    def stderr(self) -> str:
        return Path(self.log_path).read_text()

    def stop(self) -> None:
        stop_process(self.proc, timeout=self.stop_timeout)
        if self.proc.stdout:
            self.proc.stdout.close()
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class AdapterProcess(_LoggedProcess):
    """`python -m adapter ARGS` on a free port: plain HTTP (`--insecure --port`) by default,
    or TLS (`--secure-port`, bound to 127.0.0.1) with `secure=True`. Its stderr goes to a log file;
    `env` adds to the environment it inherits."""

    def __init__(self, *args: str, port: int | None = None, secure: bool = False, cwd: str | Path = ROOT,
                 env: Mapping[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.secure = secure
        self.url = f"{'https' if secure else 'http'}://127.0.0.1:{self.port}"
        serving = (["--secure-port", str(self.port), "--bind-address", "127.0.0.1"] if secure
                   else ["--insecure", "--port", str(self.port)])
        self.args = [sys.executable, "-m", "adapter", *serving, *args]
        self._start("adapter-", cwd, env, stdout=subprocess.PIPE, text=True)

    def wait_ready(self, timeout: float = 30.0) -> AdapterProcess:
        """Wait for the one line the adapter prints when it serves."""
        stdout = self.proc.stdout
        assert stdout is not None  # stdout=PIPE
        readable, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline() if readable else ""
        if "ready" not in line:
            log = self.stderr()[-3000:]
            self.stop()  # a failed start leaves nothing running
            raise RuntimeError(f"adapter did not get ready: {line!r}\n{log}")
        return self

    def wait_listening(self, timeout: float = 20.0) -> AdapterProcess:
        """Wait until `/healthz` answers (plain HTTP), even while Prometheus is not ready."""
        wait_answering(self.proc, self.url + "/healthz", self.stderr, "adapter", timeout)
        return self

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, timeout=15, **kw)


class ControllerProcess(_LoggedProcess):
    """`python -m autoscaler run --kubeconfig KUBECONFIG ARGS` with /healthz, /readyz and /metrics on
    a free loopback port; its stderr (the JSON log) goes to a log file."""

    stop_timeout = 30.0

    def __init__(self, kubeconfig: str | Path, *args: str, cwd: str | Path = ROOT,
                 env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "autoscaler", "run", "--kubeconfig", str(kubeconfig),
                     "--http-address", "127.0.0.1", "--http-port", str(self.port), *args]
        self._start("controller-", cwd, env, stdout=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 60.0) -> ControllerProcess:
        """Wait until /readyz answers 200 (its caches are listed)."""
        wait_answering(self.proc, self.url + "/readyz", self.stderr, "controller", timeout)
        return self

    def metrics(self) -> str:
        return httpx.get(self.url + "/metrics", timeout=10).text

    def kill(self) -> None:
        """SIGKILL: no graceful stop, no Lease released."""
        self.proc.kill()
        self.proc.wait()
