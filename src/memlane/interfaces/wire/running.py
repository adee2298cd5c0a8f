"""Running a network server of memlane (the HTTP API or the MCP transport) under uvicorn: memlane's log
lines beside uvicorn's, the guarded h11 protocol, and a graceful stop on SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from memlane.interfaces.wire.slow import guarded_protocol


def configure_logging(level: str) -> None:
    """memlane's own log lines (errors with their request id, the worker's summary) on stderr beside
    uvicorn's, at ``level``; once per process."""
    logger = logging.getLogger("memlane")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(level.upper())


def uvicorn_config(
    app: Any, *, host: str, port: int, log_level: str, read_timeout_s: float, **more: Any
) -> uvicorn.Config:
    """uvicorn's settings for a memlane service (the API or the MCP transport): its h11 protocol with a
    deadline for request headers (:mod:`memlane.interfaces.wire.slow`), no Server header."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,
        http=guarded_protocol(read_timeout_s),
        **more,
    )


def run_uvicorn(server: uvicorn.Server, *, on_stop: Callable[[], None] | None = None) -> None:
    """Run ``server`` until SIGTERM or Ctrl-C, then return (instead of dying of the signal).

    uvicorn has its own handlers while it runs; once it has shut down gracefully it re-raises the signal it
    caught. The handlers set here receive that signal instead of the default ones, so the caller's cleanup
    (workers finishing their jobs, the store closing) still runs and the process exits 0.
    """

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        server.should_exit = True
        if on_stop:
            on_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
