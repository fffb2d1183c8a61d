"""Filters of the v3 list that a server may not apply: apply them here, or refuse.

Why: on self-hosted servers older than the v4 list the operator lists through
``GET /api/v3/secrets/raw``. Some of those servers do not know ``metadataFilter`` (self-hosted
2024-10: its zod schema strips the unknown field and answers the whole folder), and the oldest v3
routes did not know ``tagSlugs`` either. A filter the route drops must never widen what lands in a
Secret (issue 21), and an answer cannot say whether the server applied the filter. So after every
v3 answer the filter is applied HERE as well, when the answer carries what it needs (each secret's
``secretMetadata`` / ``tags``): on a server that applied it this removes nothing, on one that
dropped it this removes what the filter excludes. When a listed secret lacks the field, the filter
cannot be checked and the answer is refused with ``errors.FilterNotSupported`` (status reason
``FilterNotSupported``): nothing is written, nothing already synced is touched.

The v4 list applies both filters itself (docs/service-contract.md) and is not checked here.
Imported secrets are never filtered by tags or metadata, on any route (the service's own rule,
docs/service-contract.md): this module leaves them alone too, so v3 and v4 list the same.
"""

from __future__ import annotations

from secretferry.service import errors, models, wire

_ENDPOINT = f"GET {wire.LIST_PATH_V3}"
_REMEDY = (
    "remove the filter from the SecretSync, or upgrade the server to one with the v4 list "
    "(GET /api/v4/secrets); nothing was written"
)


def apply_v3(query: models.ListSecretsQuery, answer: models.SecretList) -> models.SecretList:
    """``answer`` with ``query``'s tag and metadata filters applied to its own secrets; raises
    ``FilterNotSupported`` when a listed secret does not carry what a filter needs."""
    secrets = answer.secrets
    if query.metadata_filter:
        _require(secrets, "secret_metadata", field="metadataFilter", what="secret metadata")
        secrets = [s for s in secrets if _metadata_matches(s, query.metadata_filter)]
    if query.tag_slugs:
        _require(secrets, "tags", field="tagSlugs", what="tags")
        wanted = set(query.tag_slugs)
        secrets = [s for s in secrets if any(tag.slug in wanted for tag in s.tags)]
    if len(secrets) == len(answer.secrets):
        return answer
    return answer.model_copy(update={"secrets": secrets})


def _require(secrets: list[models.Secret], attribute: str, *, field: str, what: str) -> None:
    if all(attribute in s.model_fields_set for s in secrets):
        return
    raise errors.FilterNotSupported(
        f"{_ENDPOINT}: the server's answer carries no {what}, so {field} cannot be applied (this "
        f"server ignores it and would list the whole folder); {_REMEDY}",
        field=field,
    )


def _metadata_matches(secret: models.Secret, pairs: tuple[tuple[str, str], ...]) -> bool:
    """Every pair matches an unencrypted entry (the service's rule: pairs are ANDed, encrypted
    values never match)."""
    return all(
        any(m.key == key and not m.is_encrypted and m.value == value for m in secret.secret_metadata)
        for key, value in pairs
    )
