"""`python -m adapter` / `promscaler-adapter`: the process entry.

It sets the interpreter up for a fast start, then imports and runs `adapter.cli`. Nothing else
imports this module: what it does (the collector off during start-up, the kubernetes client's
parent packages left unexecuted (promscaler.kubepackages), aiohttp's unused TLS contexts built
without the CA file) is meant for the adapter's own process only."""

from __future__ import annotations

import gc
import importlib
import os
import sys

from promscaler.kubepackages import lean_packages


def import_aiohttp() -> None:
    """Import aiohttp without its import-time CA loading.

    `aiohttp.connector` builds two default TLS contexts when imported, each reading the system's
    whole CA file: ~90 ms of CPU, 10-20% of a start. The adapter never uses them (its Prometheus
    client and the kubernetes client pass contexts of their own, built later with the CA file as
    usual), so they are built with OpenSSL's `SSL_CERT_FILE` naming an empty file, then the variable
    is put back as it was: they keep the certificate directory (`SSL_CERT_DIR`), read a certificate
    at a time when a handshake needs one."""
    if "aiohttp" in sys.modules:
        return
    was = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = os.devnull
    try:
        importlib.import_module("aiohttp")
    finally:
        if was is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = was


def prepare() -> None:
    """Everything the launcher does before importing `adapter.cli` (tests/adapter/test_startup.py
    checks it in a process of its own)."""
    # Python's documented start-up pattern (gc.freeze): no collections while modules, rules and the
    # discovery listing build hundreds of thousands of long-lived objects (~15% of start-up was
    # full collections finding next to nothing); adapter.cli freezes them and turns the collector
    # on once its app is built (shortly after it starts serving).
    gc.disable()
    lean_packages()
    import_aiohttp()


def main(argv: list[str] | None = None) -> int:
    try:
        prepare()
        from adapter.cli import main as run

        return run(argv)
    finally:
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
