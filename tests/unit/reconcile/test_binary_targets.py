"""Binary values from the fetch to the target: desired (order rewrite → decode → template, the
manifest of a Secret and of a ConfigMap, the HMAC over bytes, the type and size checks), drift
(bytes compared, ConfigMap binaryData), the watch cache and echo detection."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry import models
from secretferry.reconcile import desired, drift, problems, reasons, slim, state

KEY = b"k" * 32
RAW = b"\x30\x82\xff\x00binary"  # DER-like, not UTF-8
RAW_B64 = base64.b64encode(RAW).decode()
REPO = Path(__file__).resolve().parents[3]


def make(
    data: dict[str, str], *, source: dict[str, Any] | None = None, **target: Any
) -> desired.DesiredObject:
    sync = models.SecretSync.from_body(
        {
            "metadata": {"name": "app", "namespace": "ns", "uid": "uid-1"},
            "spec": {
                "identityRef": {"name": "mi"},
                "sources": [{"projectId": "p", "environment": "e", **(source or {})}],
                "target": target,
            },
        }
    )
    return desired.build_desired(sync, [desired.FetchedSource(data)], hmac_key=KEY)


P12 = {"decoding": [{"keys": "*.p12", "strategy": "Base64"}]}


def test_secret_holds_the_bytes() -> None:
    d = make({"ks.p12": RAW_B64, "pw": "secret"}, source=P12)
    assert d.string_data == {"ks.p12": RAW, "pw": "secret"}
    assert d.manifest()["data"] == {"ks.p12": RAW_B64, "pw": base64.b64encode(b"secret").decode()}


def test_configmap_puts_bytes_into_binary_data() -> None:
    d = make(
        {"ks.p12": RAW_B64, "pem.p12": base64.b64encode(b"-----BEGIN").decode(), "x": "1"},
        source=P12,
        kind="ConfigMap",
    )
    manifest = d.manifest()
    assert manifest["data"] == {"pem.p12": "-----BEGIN", "x": "1"}  # decoded UTF-8 is text
    assert manifest["binaryData"] == {"ks.p12": RAW_B64}
    assert "binaryData" not in make({"x": "1"}, kind="ConfigMap").manifest()


def test_decoding_globs_match_the_rewritten_names() -> None:
    rewrite = [{"stripPrefix": "B64_"}, {"regexp": {"source": "_P12$", "target": ".p12"}}]
    d = make({"B64_KS_P12": RAW_B64}, source={**P12, "rewrite": rewrite})
    assert d.string_data == {"KS.p12": RAW}
    # The glob does not see the name at the service.
    d = make(
        {"ks.p12": RAW_B64},
        source={"decoding": [{"keys": "ks.*", "strategy": "Base64"}], "rewrite": [{"addPrefix": "x-"}]},
    )
    assert d.string_data == {"x-ks.p12": RAW_B64}


def test_templates_see_decoded_values() -> None:
    d = make(
        {"ks.p12": RAW_B64, "USER_B64": base64.b64encode(b"bob").decode()},
        source={"decodingStrategy": "Auto"},
        template={"data": {"out.p12": "{{ secrets['ks.p12'] }}", "user": "{{ USER_B64 }}"}},
    )
    assert d.string_data == {"out.p12": RAW, "user": "bob"}


def test_an_undecodable_value_builds_nothing() -> None:
    with pytest.raises(problems.Problem) as info:
        make({"ks.p12": "~~not base64~~"}, source=P12)
    assert info.value.reason == reasons.DECODING_FAILED and "~~" not in info.value.message


def test_hmac_covers_bytes_and_is_unchanged_for_text() -> None:
    text = {"A": "1", "B": "é"}
    legacy = desired.hmac.new(
        KEY,
        desired.json.dumps(sorted(text.items()), ensure_ascii=False, separators=(",", ":")).encode(),
        desired.hashlib.sha256,
    ).hexdigest()
    assert desired.data_hmac(text, KEY) == legacy  # text-only data: the HMAC it had before
    assert desired.data_hmac({"A": b"1", "B": "é".encode()}, KEY) == legacy  # the same bytes
    one, other = desired.data_hmac({"A": b"\xff"}, KEY), desired.data_hmac({"A": b"\xfe"}, KEY)
    assert one != other
    # Unambiguous: no text value can stand for the bytes' canonical form.
    assert desired.data_hmac({"A": '{"base64":"/w=="}'}, KEY) != one
    assert desired.data_hmac({"A": "/w=="}, KEY) != one


def test_type_checks_and_size_count_bytes() -> None:
    with pytest.raises(problems.Problem) as info:
        make(
            {".dockerconfigjson": base64.b64encode(b"\xff\xfe{}").decode()},
            source={"decodingStrategy": "Base64"},
            type="kubernetes.io/dockerconfigjson",
        )
    assert info.value.reason == reasons.INVALID_SECRET_TYPE
    big = base64.b64encode(b"\xff" * (desired.MAX_DATA_BYTES + 1)).decode()
    with pytest.raises(problems.Problem) as info:
        make({"big": big}, source={"decodingStrategy": "Base64"})
    assert info.value.reason == reasons.TARGET_TOO_LARGE
    # The decoded size counts, not the base64 text's: 3/4 of the limit in bytes fits.
    fits = base64.b64encode(b"\xff" * (desired.MAX_DATA_BYTES * 3 // 4 + 3)).decode()
    assert len(fits) > desired.MAX_DATA_BYTES
    make({"big": fits}, source={"decodingStrategy": "Base64"})


def as_read(d: desired.DesiredObject) -> dict[str, Any]:
    body = d.manifest()
    body["metadata"] = {**body["metadata"], "uid": "target-uid", "resourceVersion": "1"}
    return body


def test_drift_compares_bytes() -> None:
    d = make({"ks.p12": RAW_B64, "pw": "x"}, source=P12)
    actual = as_read(d)
    assert drift.needs_write(d, actual) is None
    edited = copy.deepcopy(actual)
    edited["data"]["ks.p12"] = base64.b64encode(RAW + b"!").decode()
    assert drift.needs_write(d, edited) == drift.DATA_CHANGED


def test_drift_of_a_configmap_reads_binary_data() -> None:
    d = make({"ks.p12": RAW_B64, "x": "1"}, source=P12, kind="ConfigMap", deletionPolicy="Delete")
    actual = as_read(d)
    assert drift.needs_write(d, actual) is None
    assert drift.actual_data(actual) == {"ks.p12": RAW, "x": b"1"}
    edited = copy.deepcopy(actual)
    edited["binaryData"]["ks.p12"] = base64.b64encode(b"\x00").decode()
    assert drift.needs_write(d, edited) == drift.DATA_CHANGED
    # The same bytes in the wrong map (text where binary belongs, or the reverse) need a write.
    moved = copy.deepcopy(actual)
    moved["binaryData"]["x"] = base64.b64encode(b"1").decode()
    del moved["data"]["x"]
    assert drift.needs_write(d, moved) == drift.DATA_CHANGED
    # A binaryData key no longer desired is removed like a data key.
    extra = copy.deepcopy(actual)
    extra["binaryData"]["old.p12"] = RAW_B64
    assert drift.keys_to_remove(d, extra, ()) == {"old.p12"}
    assert drift.needs_write(d, extra) == drift.DATA_CHANGED


def test_retained_binary_keys_are_reported() -> None:
    d = make({"x": "1"}, kind="ConfigMap")
    actual = as_read(d)
    actual["binaryData"] = {"old.p12": RAW_B64}
    assert drift.retained_keys(d, actual, ["old.p12", "x"]) == {"old.p12"}


def test_the_cache_keeps_binary_data_and_knows_its_echo() -> None:
    d = make({"ks.p12": RAW_B64}, source=P12, kind="ConfigMap")
    read = as_read(d)
    assert slim.target(read)["binaryData"] == {"ks.p12": RAW_B64}
    cache = state.TargetCache()
    key: state.TargetKey = ("ConfigMap", "ns", "app")
    cache.expect(key, d.manifest())
    assert cache.is_echo(key, {**read, "metadata": {"resourceVersion": "9"}})
    other = {**read, "binaryData": {"ks.p12": "AA=="}, "metadata": {"resourceVersion": "9"}}
    assert not cache.is_echo(key, other)


def test_the_example_parses_and_builds() -> None:
    body = yaml.safe_load((REPO / "examples" / "secretsync-binary.yaml").read_text())
    body["metadata"]["uid"] = "uid-1"
    sync = models.SecretSync.from_body(body)
    cert = b"\x30\x82\x01\x00der"
    fetched = desired.FetchedSource(
        {
            "keystore.p12": base64.encodebytes(RAW).decode(),
            "KEYSTORE_PASSWORD": "pw",
            "CERT_DER_B64": base64.b64encode(cert).decode(),
        }
    )
    d = desired.build_desired(sync, [fetched], hmac_key=KEY)
    assert d.string_data["keystore.p12"] == RAW and d.string_data["cert.der"] == cert
    assert d.string_data["KEYSTORE_PASSWORD"] == "pw"
    assert f"keystore.base64={base64.b64encode(RAW).decode()}" in str(d.string_data["keystore.properties"])
