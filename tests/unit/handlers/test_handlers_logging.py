"""The operator's log lines: JSON with the object's fields (kopf's own lines too), text with the
same fields, liveness probes at DEBUG; and where the metrics and liveness endpoints listen.

The handler ``configure_logging`` installs on stderr is pointed at a buffer here; the root logger
and the loggers it touches are put back after each test, so pytest's own capture keeps working.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pydantic
import pytest

from secretferry import logfields
from secretferry import settings as settings_mod
from secretferry.handlers import runtime

_TOUCHED = ("", "httpx", "kopf.objects", "aiohttp.access", "asyncio")


_BUFFER = io.StringIO()


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """What the configured handler writes."""
    loggers = [logging.getLogger(n) for n in _TOUCHED]
    saved = [(lg, lg.level, list(lg.handlers), list(lg.filters)) for lg in loggers]
    _BUFFER.seek(0)
    _BUFFER.truncate()
    try:
        yield _BUFFER
    finally:
        for logger, level, handlers, filters in saved:
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.filters[:] = filters


def _configure(**settings: Any) -> None:
    runtime.configure_logging(settings_mod.Settings(**settings))
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(_BUFFER)  # made on sys.stderr, which pytest captures itself


def _json_lines(output: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.getvalue().splitlines()]


def test_a_json_line_carries_the_object_fields_as_keys(output: io.StringIO) -> None:
    _configure(log_format="json")
    logging.getLogger("secretferry.reconcile.sync_report").warning(
        "SecretSync %s/%s is not Ready (%s): %s",
        "team-a",
        "app",
        "IdentityNotFound",
        "MachineIdentity 'mid' does not exist",
        extra=logfields.sync(
            ("team-a", "app"), reason="IdentityNotFound", identity="MachineIdentity/team-a/mid"
        ),
    )
    (line,) = _json_lines(output)
    assert line.pop("time").endswith("Z")
    assert line == {
        "level": "WARNING",
        "logger": "secretferry.reconcile.sync_report",
        "message": "SecretSync team-a/app is not Ready (IdentityNotFound):"
        " MachineIdentity 'mid' does not exist",
        "kind": "SecretSync",
        "namespace": "team-a",
        "name": "app",
        "reason": "IdentityNotFound",
        "identity": "MachineIdentity/team-a/mid",
    }


def test_kopf_object_lines_get_the_same_fields_and_drop_kopfs_internals(output: io.StringIO) -> None:
    _configure(log_format="json")
    body = kopf.Body({"apiVersion": "secretferry.io/v1alpha1", "kind": "MachineIdentity",
                      "metadata": {"name": "mid", "namespace": "team-a", "uid": "u-1"}})  # fmt: skip
    kopf_logger = kopf.ObjectLogger(body=body, settings=kopf.OperatorSettings())
    kopf_logger.warning("Handler 'machine_identity' failed temporarily: the controller is still starting")
    (line,) = _json_lines(output)
    assert line["logger"] == "kopf.objects"
    assert (line["kind"], line["namespace"], line["name"]) == ("MachineIdentity", "team-a", "mid")
    assert not {"k8s_ref", "k8s_skip", "settings"} & set(line)


def test_an_exception_is_one_json_line_with_its_traceback(output: io.StringIO) -> None:
    _configure(log_format="json")
    try:
        raise RuntimeError("reconcile crashed")
    except RuntimeError:
        logging.getLogger("secretferry.reconcile.scheduler").exception("reconcile of %s crashed", "x")
    (line,) = _json_lines(output)
    assert "RuntimeError: reconcile crashed" in line["exception"]


def test_a_text_line_shows_the_fields_after_the_message(output: io.StringIO) -> None:
    _configure(log_format="text")
    logging.getLogger("secretferry.reconcile.target_writes").info(
        "wrote Secret team-a/app (data-changed): keys A, B",
        extra=logfields.sync(("team-a", "app"), target="Secret/app"),
    )
    logging.getLogger("secretferry.reconcile.startup").info("no object here")
    first, second = output.getvalue().splitlines()
    assert first.endswith(
        "wrote Secret team-a/app (data-changed): keys A, B"
        " [kind=SecretSync namespace=team-a name=app target=Secret/app]"
    )
    assert second.endswith("no object here")


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_liveness_probes_are_logged_at_debug(output: io.StringIO, level: str, shown: bool) -> None:
    _configure(log_format="json", log_level=level)
    # aiohttp's request log, as kopf's liveness server writes it for each kubelet probe.
    logging.getLogger("aiohttp.access").info(
        '127.0.0.1 "GET /healthz HTTP/1.1" 200 160 "-" "kube-probe/1.34"'
    )
    lines = _json_lines(output)
    assert [line["level"] for line in lines] == (["DEBUG"] if shown else [])


def _loop_error(message: str, exc: BaseException) -> None:
    """What asyncio's default exception handler logs for a transport error (base_events)."""
    try:
        raise exc
    except BaseException as raised:
        logging.getLogger("asyncio").error(message, exc_info=raised)


_CLOSED = "unable to perform operation on <TCPTransport closed=True reading=False 0x1>; the handler is closed"


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_uvloops_closed_transport_race_is_one_debug_line(
    output: io.StringIO, level: str, shown: bool
) -> None:
    _configure(log_format="json", log_level=level)
    _loop_error(
        "Fatal error on SSL protocol\nprotocol: <uvloop.loop.SSLProtocol>\ntransport: <TCPTransport>",
        RuntimeError(_CLOSED),
    )
    lines = _json_lines(output)
    assert [line["level"] for line in lines] == (["DEBUG"] if shown else [])
    assert "Traceback" not in output.getvalue()
    if shown:
        assert "uvloop#506" in lines[0]["message"]


@pytest.mark.parametrize(
    ("message", "exc"),
    [
        ("Fatal error on SSL protocol", RuntimeError("something else")),
        ("Fatal error on SSL protocol", OSError(_CLOSED)),
        ("Task exception was never retrieved", RuntimeError(_CLOSED)),
    ],
)
def test_every_other_loop_error_keeps_its_level_and_traceback(
    output: io.StringIO, message: str, exc: BaseException
) -> None:
    _configure(log_format="json", log_level="INFO")
    _loop_error(message, exc)
    (line,) = _json_lines(output)
    assert line["level"] == "ERROR" and "Traceback" in line["exception"]


def test_configuring_twice_adds_no_second_probe_filter(output: io.StringIO) -> None:
    _configure()
    _configure()
    access = logging.getLogger("aiohttp.access")
    assert sum(1 for f in access.filters if type(f).__name__ == "_AtDebug") == 1


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("0.0.0.0", "http://0.0.0.0:8081/healthz"),  # the default, as before the setting existed
        ("::", "http://[::]:8081/healthz"),
        ("127.0.0.1", "http://127.0.0.1:8081/healthz"),
    ],
)
def test_the_liveness_endpoint_listens_on_the_listen_address(address: str, url: str) -> None:
    assert runtime.liveness_endpoint(settings_mod.Settings(listen_address=address)) == url


def test_no_liveness_endpoint_without_a_port() -> None:
    assert runtime.liveness_endpoint(settings_mod.Settings(liveness_port=0)) is None


def test_the_listen_address_defaults_to_every_ipv4_interface_and_must_be_an_ip() -> None:
    assert settings_mod.Settings().listen_address == "0.0.0.0"
    with pytest.raises(pydantic.ValidationError, match="not an IP address"):
        settings_mod.Settings(listen_address="localhost")


def test_a_text_line_cannot_be_forged_by_what_it_quotes(output: io.StringIO) -> None:
    _configure(log_format="text")
    forged = "x\n2026-01-01T00:00:00.000Z ERROR secretferry: forged\r\u2028"
    logging.getLogger("secretferry.reconcile.sync").warning(
        "source path %s has key %s", f"/app{forged}", "K\u202eEY", extra=logfields.sync(("ns", f"s{forged}"))
    )
    (line,) = output.getvalue().splitlines()
    assert "/appx\\n2026-01-01T00:00:00.000Z ERROR secretferry: forged\\r\\u2028" in line
    assert "K\\u202eEY" in line
    assert "name=sx\\n2026" in line


def test_a_traceback_in_text_is_indented_and_escaped(output: io.StringIO) -> None:
    _configure(log_format="text")
    try:
        raise ValueError("bad key\n2026-01-01T00:00:00.000Z ERROR forged")
    except ValueError:
        logging.getLogger("secretferry.reconcile.scheduler").exception("reconcile crashed")
    first, *rest = output.getvalue().splitlines()
    assert first.endswith("reconcile crashed")
    # The message's line break is the traceback's own (it cannot be told from one), but the line
    # after it is indented like every traceback line: it does not pass for a log line.
    assert rest and all(line.startswith("  ") for line in rest)
    assert "  ValueError: bad key" in rest
    assert "  2026-01-01T00:00:00.000Z ERROR forged" in rest
