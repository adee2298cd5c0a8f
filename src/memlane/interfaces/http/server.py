"""Running the service: uvicorn for the API, a thread for the extraction workers, one graceful stop.

SIGTERM or Ctrl-C: uvicorn stops accepting, finishes the requests in flight, runs the app's shutdown
(which stops the workers claiming), and the workers finish the jobs they hold before the process exits.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any

import uvicorn

from memlane.core.errors import ConfigError
from memlane.core.extraction.worker import Worker
from memlane.core.memory import Memory
from memlane.core.retention import DEFAULT_SWEEP_INTERVAL_S
from memlane.interfaces.http.app import create_app, usable_admin_key
from memlane.interfaces.http.console import CONSOLE_PATH
from memlane.interfaces.http.settings import HttpSettings
from memlane.interfaces.wire.running import configure_logging, run_uvicorn, uvicorn_config

log = logging.getLogger("memlane.serve")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420
GRACEFUL_TIMEOUT_S = 30


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_admin_key(admin_key: str | None, *, insecure_dev: bool, host: str) -> str | None:
    """The admin key to use (trimmed; a ValidationError if it is too short: :func:`usable_admin_key`). No
    admin key is allowed only in insecure dev mode, and only on a loopback address."""
    if admin_key:
        return usable_admin_key(admin_key)
    if not insecure_dev:
        raise ConfigError("set MEMLANE_ADMIN_KEY (at least 16 characters), or --insecure-dev on a loopback host")
    if not is_loopback(host):
        raise ConfigError(f"--insecure-dev is refused on {host}: only on a loopback host (127.0.0.1, ::1)")
    return None


class ConsoleAnnouncingServer(uvicorn.Server):
    """uvicorn's server, which says where the console is once it listens (the port may have been 0)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        for server in self.servers:
            for sock in server.sockets:
                log.info("memory console at %s", console_url(sock.getsockname()))


def console_url(address: tuple[Any, ...] | str) -> str:
    """The console's address for a listening socket's name: a wildcard address is shown as loopback."""
    if isinstance(address, str):  # a Unix socket
        return f"unix:{address} {CONSOLE_PATH}/"
    host, port = str(address[0]), int(address[1])
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{CONSOLE_PATH}/"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How ``memlane serve`` listens and how much extraction it runs alongside."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = 1  # extraction jobs in flight in this process; 0: none (run `memlane worker` instead)
    lease_s: float = 120.0
    # Seconds between the extraction worker's retention sweeps (memlane.core.retention); 0: none. Only a
    # process that runs workers sweeps.
    retention_every_s: float = DEFAULT_SWEEP_INTERVAL_S
    log_level: str = "info"
    access_log: bool = True


class WorkerThread:
    """The extraction worker on a thread of its own, stoppable from a signal handler or the app's shutdown."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=self._run, name="memlane-worker", daemon=True)

    def _run(self) -> None:
        stats = self.worker.run()
        log.info(
            "extraction worker stopped: %d done, %d retried, %d dead, %d lost, %d crashed",
            stats.done,
            stats.retried,
            stats.dead,
            stats.lost,
            len(stats.errors),
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()

    def join(self) -> None:
        self.worker.stop()
        self.thread.join()


def serve(
    memory: Memory,
    *,
    admin_key: str | None,
    insecure_dev: bool = False,
    options: ServeOptions | None = None,
    settings: HttpSettings | None = None,
) -> None:
    """Serve the API (and, with ``options.workers`` > 0, run extraction) until SIGTERM or Ctrl-C."""
    opts = options or ServeOptions()
    settings = settings or HttpSettings()
    configure_logging(opts.log_level)
    admin_key = check_admin_key(admin_key, insecure_dev=insecure_dev, host=opts.host)
    runner = None
    if opts.workers > 0:
        worker = memory.worker(concurrency=opts.workers, lease_s=opts.lease_s, retention_every_s=opts.retention_every_s)
        runner = WorkerThread(worker)
    app = create_app(
        memory,
        admin_key=admin_key or None,
        insecure_dev=insecure_dev,
        settings=settings,
        on_shutdown=runner.stop if runner else None,
    )
    config = uvicorn_config(
        app,
        host=opts.host,
        port=opts.port,
        log_level=opts.log_level,
        read_timeout_s=settings.read_timeout_s,
        access_log=opts.access_log,
        timeout_graceful_shutdown=GRACEFUL_TIMEOUT_S,
    )
    log.info("answering Host names: %s (--allowed-hosts)", ", ".join(settings.allowed_hosts))
    if runner:
        runner.start()
    try:
        run_uvicorn(ConsoleAnnouncingServer(config), on_stop=runner.stop if runner else None)
    finally:
        if runner:
            runner.join()
