"""``secretferry run``: settings, logging, metrics, then kopf with our handlers."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import kopf
from prometheus_client import start_http_server
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from secretferry import controlchars, logfields, metrics, readiness
from secretferry import settings as settings_mod
from secretferry.handlers import leases as _lease_handlers  # noqa: F401 - registers the handlers
from secretferry.handlers import operator as _handlers  # noqa: F401 - registers the handlers

# What kopf puts into a per-object line's ``extra`` (kopf/_core/actions/loggers.py ObjectLogger):
# the object's reference, and two values for its own event poster. The reference is printed as our
# fields (``_KopfObjectFields``); the rest is not for a log collector (``settings`` is kopf's whole
# configuration object).
_KOPF_EXTRA = ("k8s_ref", "k8s_skip", "settings")
# Where kopf's reference keeps what our fields are called.
_KOPF_REF_KEYS = ((logfields.KIND, "kind"), (logfields.NAMESPACE, "namespace"), (logfields.NAME, "name"))
# aiohttp's request log: it names every request to kopf's liveness endpoint, at INFO.
_ACCESS_LOGGER = "aiohttp.access"


def _utc_millis(record: logging.LogRecord) -> str:
    """UTC with milliseconds: sub-second ordering is what latency questions need."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class JsonFormatter(_JsonFormatter):
    """One JSON object per line, for log collectors (python-json-logger): ``time``, ``level``,
    ``logger``, ``message``, then the line's fields (``logfields``: ``kind``, ``namespace``,
    ``name``, ``identity``, ``scope``, ``reason``, ``target``, or whatever else it was given in
    ``extra``), and ``exception`` with a traceback. Messages and fields never carry secret values."""

    def __init__(self) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message"],
            rename_fields={
                "asctime": "time",
                "levelname": "level",
                "name": "logger",
                "exc_info": "exception",
                logfields.NAME: "name",
            },
            reserved_attrs=[*RESERVED_ATTRS, *_KOPF_EXTRA],
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_millis(record)


class TextFormatter(logging.Formatter):
    """A line for humans: time, level, logger and message, then the line's fields as key=value.

    One record is one line: control characters in the message and the fields are escaped
    (``controlchars``), since they quote paths, key names and texts tenants and the service
    wrote; a traceback follows on lines of its own, indented, so no part of it reads as a line.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = controlchars.escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return controlchars.escape_block(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return controlchars.escape_block(super().formatStack(stack_info))

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info:  # a traceback cached by another handler was not escaped: make ours
            record.exc_text = None
        text = super().format(record)
        fields = [(f, getattr(record, f, None)) for f in logfields.FIELDS]
        shown = " ".join(
            f"{'name' if f == logfields.NAME else f}={controlchars.escape(str(v))}" for f, v in fields if v
        )
        if not shown:
            return text
        head, newline, trace = text.partition("\n")  # fields on the message's line, not the traceback's
        return f"{head} [{shown}]{newline}{trace}"


class _KopfObjectFields(logging.Filter):
    """kopf's per-object lines name their object in ``extra["k8s_ref"]``: give them our fields,
    so one query finds an object's lines whichever of us logged them."""

    def filter(self, record: logging.LogRecord) -> bool:
        ref: Any = getattr(record, "k8s_ref", None)
        if isinstance(ref, dict):
            for field, key in _KOPF_REF_KEYS:
                if ref.get(key) and not hasattr(record, field):
                    setattr(record, field, ref[key])
        return True


class _AtDebug(logging.Filter):
    """Lowers a logger's lines to DEBUG: aiohttp logs every request to the liveness endpoint at
    INFO, one line per kubelet probe (every 20 s, forever), which drowns what INFO is for."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class _ClosedTransportRace(logging.Filter):
    """One line at DEBUG, not an ERROR with a traceback, for uvloop's known race on a TLS
    connection that is already closed: its SSL protocol still writes to the closed transport and
    the loop logs "Fatal error on SSL protocol" with ``RuntimeError: unable to perform operation on
    <TCPTransport closed=True ...>; the handler is closed`` (MagicStack/uvloop#506, open). The
    connection was over anyway and its owner (aiohttp, httpx) has already seen it close and retries
    or reports as for any closed connection; a traceback in the log would send people after a
    failure that is not there. Every other asyncio error passes untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not (
            isinstance(exc, RuntimeError)
            and "the handler is closed" in str(exc)
            and str(record.msg).startswith(("Fatal error on SSL protocol", "Fatal error on transport"))
        ):
            return True
        record.msg = "a TLS connection was already closed when uvloop wrote to it (uvloop#506)"
        record.args = ()
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def configure_logging(cfg: settings_mod.Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if cfg.log_format == "json" else TextFormatter())
    handler.addFilter(_KopfObjectFields())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(cfg.log_level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # httpx logs URLs per request at INFO
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    access = logging.getLogger(_ACCESS_LOGGER)
    if not any(isinstance(f, _AtDebug) for f in access.filters):
        access.addFilter(_AtDebug())
    loop_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _ClosedTransportRace) for f in loop_log.filters):
        loop_log.addFilter(_ClosedTransportRace())
    # The metrics endpoint (prometheus_client's server) logs no requests at all.


def liveness_endpoint(cfg: settings_mod.Settings) -> str | None:
    """kopf's liveness URL: kopf listens on its host and port (an IPv6 address in brackets)."""
    if not cfg.liveness_port:
        return None
    host = f"[{cfg.listen_address}]" if ":" in cfg.listen_address else cfg.listen_address
    return f"http://{host}:{cfg.liveness_port}/healthz"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="secretferry run", description="Run the operator.")
    parser.parse_args(list(argv or []))
    cfg = settings_mod.load()
    configure_logging(cfg)
    if cfg.kubeconfig:
        os.environ["KUBECONFIG"] = cfg.kubeconfig  # kopf's own login reads it
    metrics.export_per_object(cfg.per_object_metrics)
    if cfg.metrics_port:
        start_http_server(cfg.metrics_port, addr=cfg.listen_address)
    try:
        import uvloop

        # 10-28 % faster at scale (docs/architecture.md)
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    namespaces = cfg.watched_namespaces()
    kopf.run(
        # kopf's peering would pause only kopf's handlers, not our controller's tasks; replicas
        # elect a leader with a Lease instead (handlers.operator), so kopf itself runs standalone.
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness_endpoint(cfg),
        memo=kopf.Memo(settings=cfg, readiness=readiness.Readiness()),
    )
    return 0
