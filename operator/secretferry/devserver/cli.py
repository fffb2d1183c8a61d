"""``python -m secretferry.devserver`` / ``secretferry dev-server``: parse flags, run uvicorn.

uvicorn and the app (fastapi) come from the ``devserver`` extra; ``secretferry.cli`` imports this
module lazily and turns their absence into one line saying ``pip install 'secretferry[devserver]'``.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import uvicorn
import yaml

from secretferry.devserver import profiles, seed
from secretferry.devserver.app import create_app
from secretferry.devserver.config import DevServerConfig, EventGeneration


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="secretferry dev-server", description="Reference secrets service for development."
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--profile",
        choices=sorted(profiles.PROFILES),
        default="newest",
        help="behave like one real server generation (devserver/profiles.py); flags below still win",
    )
    p.add_argument("--port", type=int, default=8222)
    p.add_argument(
        "--data", type=Path, default=Path("devserver.sqlite"), help="SQLite file (kept across restarts)"
    )
    p.add_argument("--seed", type=Path, help="seed YAML, applied only when the database is fresh")
    p.add_argument(
        "--event-generation",
        choices=get_args(EventGeneration),
        default="newest",
        help="event stream generation to speak: the real server's newest, middle or old, or documented",
    )
    p.add_argument("--token-error-status", type=int, choices=[401, 403], default=401)
    p.add_argument("--heartbeat-seconds", type=float, default=15.0)
    p.add_argument("--recheck-seconds", type=float, default=60.0)
    p.add_argument(
        "--no-events-plan", action="store_true", help="answer subscriptions 400 (plan lacks events)"
    )
    p.add_argument("--stream-cap", type=int, default=5, help="open streams per (project, identity)")
    p.add_argument(
        "--no-v4",
        action="store_true",
        help="leave out every /api/v4/secrets route (404 like an unknown route), as older servers",
    )
    admin = p.add_mutually_exclusive_group()
    admin.add_argument(
        "--admin-token",
        help="X-Admin-Token value the admin API (/_admin) requires; visible in the process list, "
        "so on a shared machine prefer the generated one (default: a random token per start)",
    )
    admin.add_argument(
        "--admin-token-file",
        type=Path,
        help="where the generated admin token is written, mode 0600 (default: <data>.admin-token)",
    )
    p.add_argument(
        "--rate-limits",
        choices=["on", "off"],
        help="per-IP route limits as a self-hosted server in production mode (40 secret reads, 60 "
        "reads, 200 writes/logins a minute); default: the profile's (on for selfhosted-2024-10)",
    )
    p.add_argument("--faults", help="fault document: a YAML/JSON file path or inline JSON")
    p.add_argument("--log-level", default="info")
    # HTTPS, as a self-hosted server behind a private CA serves it: tests generate the CA and
    # the pair (tests/integration/operator/test_operator_tls.py). Both or neither.
    p.add_argument("--tls-cert", type=Path, help="PEM certificate (chain) to serve HTTPS with")
    p.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    return p


def _faults(value: str | None) -> dict[str, Any] | None:
    if not value:
        return None
    inline = value.lstrip().startswith("{")
    doc = json.loads(value) if inline else yaml.safe_load(Path(value).read_text())
    if not isinstance(doc, dict):
        raise SystemExit("--faults must be a mapping")
    return doc


def config_from(args: argparse.Namespace) -> DevServerConfig:
    """The profile's values, then every flag that differs from its default on top."""
    config = DevServerConfig(**profiles.overrides(args.profile))
    explicit = DevServerConfig(
        data_path=args.data,
        seed=seed.load(args.seed) if args.seed else None,
        event_generation=args.event_generation,
        token_error_status=args.token_error_status,
        heartbeat_seconds=args.heartbeat_seconds,
        recheck_seconds=args.recheck_seconds,
        events_plan=not args.no_events_plan,
        stream_cap=args.stream_cap,
        v4_secrets=not args.no_v4,
        admin_token=args.admin_token,
        admin_token_file=args.admin_token_file,
        faults=_faults(args.faults),
    )
    defaults = DevServerConfig()
    for name in explicit.__dataclass_fields__:
        value = getattr(explicit, name)
        if value != getattr(defaults, name) or name in ("data_path", "seed"):
            setattr(config, name, value)
    if args.rate_limits is not None:  # "off" equals the default, so it is applied here
        config.rate_limits = args.rate_limits == "on"
    return config


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        p.error("--tls-cert and --tls-key go together")
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(config_from(args))
    # One worker, no reload: state (event bus, fault set) lives in this process.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        ssl_certfile=args.tls_cert,
        ssl_keyfile=args.tls_key,
    )
    return 0
