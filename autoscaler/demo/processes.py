"""Child processes the demo starts (adapter, controller): logs to files, never outlive the demo.

Each child runs in its own session (a Ctrl-C in the terminal reaches only the demo, which then
stops them in order) and asks the kernel to SIGTERM it if the demo itself dies without cleaning up.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kubesim.processes import stop_process

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """`python -m <module> <args>` with output to `<log_dir>/<name>.log`."""

    def __init__(self, name: str, module: str, args: Sequence[str], log_dir: Path, cwd: Path | None = None) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", module, *args]
        self.log_path = log_dir / f"{name}.log"
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> Child:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.cwd, start_new_session=True, preexec_fn=_die_with_parent,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (graceful shutdown), then SIGKILL after `timeout`; always reaps."""
        if self.proc is None:
            return
        stop_process(self.proc, timeout)
