"""``secretferry run``: settings, logging, metrics, then kopf with our handlers."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import kopf
from prometheus_client import start_http_server

from secretferry import settings as settings_mod
from secretferry.handlers import operator as _handlers  # noqa: F401 - registers the handlers


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log collectors. Messages never carry secret values."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            # UTC with milliseconds: sub-second ordering is what latency questions need
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(cfg: settings_mod.Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if cfg.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(cfg.log_level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # httpx logs URLs per request at INFO
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="secretferry run", description="Run the operator.")
    parser.parse_args(list(argv or []))
    cfg = settings_mod.load()
    configure_logging(cfg)
    if cfg.kubeconfig:
        os.environ["KUBECONFIG"] = cfg.kubeconfig  # kopf's own login reads it
    if cfg.metrics_port:
        start_http_server(cfg.metrics_port)
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # 10-28 % faster at scale (design.md)
    except ImportError:
        pass
    namespaces = cfg.watched_namespaces()
    kopf.run(
        # kopf's peering would pause only kopf's handlers, not our controller's tasks; replicas
        # elect a leader with a Lease instead (handlers.operator), so kopf itself runs standalone.
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=f"http://0.0.0.0:{cfg.liveness_port}/healthz" if cfg.liveness_port else None,
        memo=kopf.Memo(settings=cfg),
    )
    return 0
