"""PasswordGenerator rules as the model (and the CRD's CEL twin) accept or refuse them."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from secretferry.models import generators


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({}, None),  # defaults: 24 = 4 digits + 4 symbols + 16 letters
        ({"length": 8, "digits": 4, "symbols": 4}, None),
        ({"length": 7}, "greater than or equal to 8"),
        ({"length": 257, "allowRepeat": True}, "less than or equal to 256"),
        ({"length": 8, "digits": 5, "symbols": 4}, "digits \\+ symbols must not exceed length"),
        ({"digits": 11}, "at most 10 digits"),
        ({"digits": 11, "allowRepeat": True}, None),
        ({"symbols": 4, "symbolCharacters": "-_"}, "at most as many symbols"),
        ({"symbolCharacters": "--_"}, "lists a character twice"),
        ({"symbolCharacters": "a-"}, "String should match pattern"),
        ({"symbolCharacters": " -"}, "String should match pattern"),
        ({"length": 64, "digits": 0, "symbols": 0}, "distinct letters"),
        ({"length": 52, "digits": 0, "symbols": 0}, None),
        ({"length": 27, "digits": 0, "symbols": 0, "noUpper": True}, "distinct letters"),
        ({"length": 256, "digits": 0, "symbols": 0, "allowRepeat": True}, None),
        ({"target": {"name": "sh.helm.release.v1.app.v1"}}, "Helm's release records"),
        ({"target": {"name": "Not_A_Name"}}, "String should match pattern"),
    ],
)
def test_password_rules(spec: dict[str, Any], error: str | None) -> None:
    if error is None:
        generators.PasswordGeneratorSpec.model_validate(spec)
        return
    with pytest.raises(pydantic.ValidationError, match=error):
        generators.PasswordGeneratorSpec.model_validate(spec)


def test_secret_name_defaults_to_the_generator_name_and_keys_follow_the_kind() -> None:
    meta = {"name": "db", "namespace": "app", "uid": "u1"}
    pw = generators.parse("PasswordGenerator", {"metadata": meta, "spec": {}})
    uid = generators.parse("UUIDGenerator", {"metadata": meta, "spec": {"target": {"name": "ids"}}})
    assert (pw.secret_name, pw.key) == ("db", "password")
    assert (uid.secret_name, uid.key) == ("ids", "uuid")


def test_the_regenerate_token_is_read_from_the_annotation_and_blank_means_none() -> None:
    def token(value: str) -> str | None:
        meta = {"name": "db", "annotations": {generators.REGENERATE_ANNOTATION: value}}
        return generators.parse("PasswordGenerator", {"metadata": meta}).regenerate_token

    assert token("2026-11-27") == "2026-11-27"
    assert token("  ") is None


def test_rules_leave_the_target_out() -> None:
    a = generators.PasswordGeneratorSpec.model_validate({"target": {"name": "x"}})
    b = generators.PasswordGeneratorSpec.model_validate({})
    assert a.rules() == b.rules()
    assert generators.PasswordGeneratorSpec.model_validate({"length": 30}).rules() != b.rules()
