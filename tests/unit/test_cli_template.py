"""``secretferry template``: a SecretSync rendered against sample values by the operator's own pass.

Every case runs the real command (``cli.main``) over files, and the render in real worker
processes (the operator's RenderPool, its limits from SECRETFERRY_TEMPLATE_* as in the operator).
Failures must be the reason and message the operator's own functions give, and no sample value
may appear anywhere unless ``--show-values`` asks for it.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from secretferry import cli
from secretferry.models import secretsync
from secretferry.reconcile import desired, problems
from secretferry.reconcile.rendering import rewrite

PASSWORD = "hunter2-sample-password"
USER = "alice-sample-user"


def _sync(target: dict[str, Any] | None = None, **source: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "secretferry.io/v1alpha1",
        "kind": "SecretSync",
        "metadata": {"name": "db", "namespace": "team-a"},
        "spec": {
            "identityRef": {"name": "ferry"},
            "sources": [{"projectSlug": "app", "environment": "dev", "path": "/db", **source}],
        },
    }
    if target is not None:
        body["spec"]["target"] = target
    return body


def _write(tmp_path: Path, name: str, content: Any) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["template", *args])
    out, err = capsys.readouterr()
    return code, out, err


URL_TEMPLATE = {"template": {"data": {"url": "postgres://{{ USER }}:{{ PASSWORD }}@db:5432/app"}}}


def test_renders_the_secret_with_values_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target={"name": "db-creds", **URL_TEMPLATE}))
    values = _write(tmp_path, "values.yaml", {"USER": USER, "PASSWORD": PASSWORD})
    code, out, err = _run(capsys, "-f", str(sync), "--values", str(values))
    assert (code, err) == (0, "")
    secret = yaml.safe_load(out)
    url = f"postgres://{USER}:{PASSWORD}@db:5432/app"
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["name"] == "db-creds"
    assert secret["metadata"]["namespace"] == "team-a"
    assert secret["metadata"]["labels"]["secretferry.io/sync"] == "db"
    assert secret["data"] == {"url": f"<redacted {len(url)} bytes>"}
    assert "secretferry.io/data-hmac" not in (secret["metadata"].get("annotations") or {})
    assert PASSWORD not in out and USER not in out
    assert base64.b64encode(url.encode()).decode() not in out


def test_show_values_prints_an_equivalent_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target=URL_TEMPLATE))
    code, out, _ = _run(
        capsys, "-f", str(sync), "--set", f"USER={USER}", "--set", f"PASSWORD={PASSWORD}", "--show-values"
    )
    assert code == 0
    assert yaml.safe_load(out)["stringData"] == {"url": f"postgres://{USER}:{PASSWORD}@db:5432/app"}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("values.env", f"# sample\nexport USER={USER}\nPASSWORD='{PASSWORD}'\n"),
        ("values.json", f'{{"USER": "{USER}", "PASSWORD": "{PASSWORD}"}}'),
        ("values.yaml", f"USER: {USER}\nPASSWORD: {PASSWORD}\n"),
    ],
)
def test_values_files_yaml_json_and_dotenv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target=URL_TEMPLATE))
    code, out, _ = _run(
        capsys, "-f", str(sync), "--values", str(_write(tmp_path, name, text)), "--show-values"
    )
    assert code == 0, out
    assert yaml.safe_load(out)["stringData"]["url"] == f"postgres://{USER}:{PASSWORD}@db:5432/app"


def test_set_overrides_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync())
    values = _write(tmp_path, "v.yaml", {"A": "from-file", "B": "kept"})
    code, out, _ = _run(
        capsys, "-f", str(sync), "--values", str(values), "--set", "A=from-flag", "--show-values"
    )
    assert code == 0
    assert yaml.safe_load(out)["stringData"] == {"A": "from-flag", "B": "kept"}


def test_a_template_error_is_the_operators_reason_and_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target=URL_TEMPLATE))
    code, out, err = _run(capsys, "-f", str(sync), "--set", f"USER={USER}")
    assert (code, out) == (1, "")
    assert err == "TemplateError: template 'url': refers to keys that were not fetched: PASSWORD\n"


def test_a_template_that_quotes_a_value_in_an_error_does_not_leak_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Jinja's own message would be "dict object has no attribute <the password>".
    target = {"template": {"data": {"x": "{{ secrets[PASSWORD] }}"}}}
    sync = _write(tmp_path, "sync.yaml", _sync(target=target))
    code, _, err = _run(capsys, "-f", str(sync), "--set", f"PASSWORD={PASSWORD}")
    assert code == 1
    assert err.startswith("TemplateError: template 'x': ")
    assert PASSWORD not in err


def test_a_cpu_bomb_hits_the_operators_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator's settings, from the same variables: a short CPU limit keeps the test quick.
    monkeypatch.setenv("SECRETFERRY_TEMPLATE_CPU_LIMIT_SECONDS", "0.5")
    monkeypatch.setenv("SECRETFERRY_TEMPLATE_TIMEOUT_SECONDS", "3")
    bomb = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"
    sync = _write(tmp_path, "sync.yaml", _sync(target={"template": {"data": {"bomb": bomb}}}))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "A=1")
    assert code == 1
    assert err.startswith("TemplateError: template 'bomb': ")
    assert "CPU" in err or "cpu" in err


def test_a_memory_bomb_hits_the_memory_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = (
        "{% set ns = namespace(s='x' * 1000000) %}"
        "{% for i in range(11) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"
    )
    sync = _write(tmp_path, "sync.yaml", _sync(target={"template": {"data": {"bomb": bomb}}}))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "A=1")
    assert (code, err) == (1, "TemplateError: template 'bomb': exceeded the memory limit of 64 MiB\n")


def test_invalid_limits_are_named_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRETFERRY_TEMPLATE_CPU_LIMIT_SECONDS", "5")
    monkeypatch.setenv("SECRETFERRY_TEMPLATE_TIMEOUT_SECONDS", "1")
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "sync.yaml", _sync())), "--set", "A=1")
    assert code == 2
    assert "template_timeout_seconds must be above template_cpu_limit_seconds" in err


def test_an_output_bomb_hits_the_output_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}"
    sync = _write(tmp_path, "sync.yaml", _sync(target={"template": {"data": {"bomb": bomb}}}))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "A=1")
    assert code == 1
    assert err.startswith("TemplateError: template 'bomb': ")
    assert "output" in err


def test_a_value_that_does_not_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(decodingStrategy="Base64"))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "CERT=not*base64!")
    assert code == 1
    assert err.startswith("DecodingFailed: ")
    assert "CERT" in err and "not*base64!" not in err


def test_decoded_binary_values_are_masked_and_shown_as_base64(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = bytes([0xFF, 0x00, 0xFE, 0x01])
    sync = _write(tmp_path, "sync.yaml", _sync(decodingStrategy="Base64"))
    encoded = base64.b64encode(raw).decode()
    code, out, _ = _run(capsys, "-f", str(sync), "--set", f"KEYSTORE={encoded}")
    assert (code, yaml.safe_load(out)["data"]) == (0, {"KEYSTORE": "<redacted 4 bytes>"})
    code, out, _ = _run(capsys, "-f", str(sync), "--set", f"KEYSTORE={encoded}", "--show-values")
    assert (code, yaml.safe_load(out)["data"]) == (0, {"KEYSTORE": encoded})


def test_a_rewrite_collision_is_the_operators_key_collision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = [{"transform": "Upper"}]
    body = _sync(rewrite=rules)
    sync = _write(tmp_path, "sync.yaml", body)
    code, _, err = _run(capsys, "-f", str(sync), "--set", "db_user=a", "--set", "DB_USER=b")
    assert code == 1
    model = secretsync.SecretSync.from_body(body)
    with pytest.raises(problems.Problem) as expected:
        rewrite.rewrite_keys({"db_user": "a", "DB_USER": "b"}, model.spec.sources[0].rewrite, source_index=0)
    assert err == f"KeyCollision: {expected.value.message}\n"


def test_an_empty_sample_is_source_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "sync.yaml", _sync())))
    assert code == 1
    assert err.startswith("SourceEmpty: source 1 ")


def test_a_bad_key_is_invalid_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "sync.yaml", _sync())), "--set", "a key=1")
    assert code == 1
    assert err.startswith("InvalidKey: ") and "a key" in err


def test_a_secret_type_without_its_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target={"type": "kubernetes.io/tls"}))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "tls.crt=x")
    assert (code, err) == (1, "InvalidSecretType: type kubernetes.io/tls needs keys: tls.key\n")


def test_a_protected_target_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target={"name": "sh.helm.release.v1.app.v1"}))
    code, _, err = _run(capsys, "-f", str(sync), "--set", "A=1")
    assert code == 1
    assert err.startswith("TargetProtected: ")


def test_an_invalid_spec_is_invalid_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = _sync()
    body["spec"]["refreshInterval"] = "0s"
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "sync.yaml", body)), "--set", "A=1")
    assert code == 1
    assert err.startswith("InvalidSpec: spec.refreshInterval")


def test_the_same_object_the_operator_builds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Masking aside, the command prints ``desired.build_desired``'s object."""
    body = _sync(target={"kind": "ConfigMap", "labels": {"team": "a"}}, rewrite=[{"addPrefix": "APP_"}])
    code, out, _ = _run(capsys, "-f", str(_write(tmp_path, "s.yaml", body)), "--set", "x=1", "--show-values")
    assert code == 0
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    want = desired.build_desired(
        secretsync.SecretSync.from_body(body), [desired.FetchedSource(direct={"x": "1"})], hmac_key=b"k"
    ).manifest()
    del want["metadata"]["annotations"]  # the data HMAC: keyed with the operator's key
    assert yaml.safe_load(out) == want


# --- templateFrom -------------------------------------------------------------------------------

FROM = {"template": {"templateFrom": [{"configMap": {"name": "tpl"}}]}}


def _config_map(labelled: bool = True) -> dict[str, Any]:
    labels = {"secretferry.io/template-source": "true"} if labelled else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tpl", "labels": labels},
        "data": {"config.ini": "user={{ USER }}"},
    }


def test_template_from_a_source_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target=FROM))
    source = _write(tmp_path, "tpl.yaml", _config_map())
    code, out, _ = _run(
        capsys, "-f", str(sync), "--template-source", str(source), "--set", "USER=bob", "--show-values"
    )
    assert code == 0
    assert yaml.safe_load(out)["stringData"] == {"config.ini": "user=bob"}


def test_template_from_an_unlabelled_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync(target=FROM))
    source = _write(tmp_path, "tpl.yaml", _config_map(labelled=False))
    code, _, err = _run(capsys, "-f", str(sync), "--template-source", str(source), "--set", "USER=bob")
    assert code == 1
    assert err.startswith("TemplateSourceNotLabelled: ConfigMap team-a/tpl ")


def test_template_from_a_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "s.yaml", _sync(target=FROM))), "--set", "USER=b")
    assert code == 1
    assert err.startswith("TemplateSourceMissing: ConfigMap team-a/tpl ")


# --- usage --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["-f", "x.yaml", "--live", "a/b"],
    ],
)
def test_one_secretsync_is_named(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, _, err = _run(capsys, *args)
    assert code == 2
    assert "-f FILE or --live" in err


def test_a_file_without_a_secretsync(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "-f", str(_write(tmp_path, "x.yaml", {"kind": "ConfigMap"})))
    assert (code, err) == (
        2,
        f"secretferry template: {tmp_path / 'x.yaml'}: expected exactly one SecretSync, found 0\n",
    )


def test_a_values_file_is_never_quoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sync = _write(tmp_path, "sync.yaml", _sync())
    values = _write(tmp_path, "v.json", '{"A": "' + PASSWORD + '",}')
    code, _, err = _run(capsys, "-f", str(sync), "--values", str(values))
    assert code == 2
    assert "not JSON" in err and PASSWORD not in err
