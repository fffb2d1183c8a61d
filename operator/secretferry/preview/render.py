"""The render of ``secretferry template``: the operator's own pass from "the service answered"
to "this is the Secret we want", with sample values in place of the service.

Nothing is re-implemented: the same guards (``guards.source_problem``: SourceEmpty, before
anything is built), the same templateFrom resolution (``template_sources.resolve``), the same
``desired.render_and_build`` (filters, rewrite → KeyCollision, decoding → DecodingFailed, the
template in a worker process of a ``RenderPool`` built from the same settings — CPU, memory,
output and wall-clock limits, worker count: the ``SECRETFERRY_TEMPLATE_*`` variables, read from
this environment as the operator reads them from its own — and the key, type and size checks),
and the same target checks made before any write (``guards.protected_name``,
``guards.reserved_marks``). A failure is the ``problems.Problem`` the operator would put in the
SecretSync's Ready condition, reason and message alike.

What it cannot know, and does not check: the identity's template opt-in (TemplatesNotAllowed),
the service's answers (auth, permissions, empty folders that are typos), and the existing
target (TargetConflict, TargetNotOptedIn); those need the cluster and the service.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from secretferry import settings as settings_mod
from secretferry.models import reserved, secretsync
from secretferry.reconcile import desired, guards
from secretferry.reconcile.rendering import pool, template_sources

# The data HMAC is keyed by the operator's secret key, which a user does not have: the printed
# object is built with a throwaway key and its HMAC annotation left out (it would match nothing).
_THROWAWAY_KEY_BYTES = 32


def fetched_for(sync: secretsync.SecretSync, values: Mapping[str, str]) -> list[desired.FetchedSource]:
    """What every source of ``sync`` lists, in the sample: the same values for each one."""
    return [desired.FetchedSource(direct=dict(values)) for _ in sync.spec.sources]


async def render(
    sync: secretsync.SecretSync,
    values: Mapping[str, str],
    *,
    reader: template_sources.Reader,
    settings: settings_mod.Settings,
) -> desired.DesiredObject:
    """The desired target of ``sync`` over ``values``; raises ``problems.Problem`` as the pass would."""
    fetched = fetched_for(sync, values)
    problem = guards.source_problem(sync, fetched)
    if problem is not None:
        raise problem
    template = sync.spec.target.template
    namespace = sync.metadata.namespace or "default"
    texts: dict[str, str] = {}
    if template is not None:
        texts = (
            await template_sources.resolve(
                template, namespace=namespace, reader=reader, sync_key=(namespace, sync.metadata.name)
            )
            if template.template_from
            else dict(template.data)
        )
    renderer = pool.RenderPool(pool.limits_from(settings), workers=settings.template_workers)
    try:
        want = await desired.render_and_build(
            sync,
            fetched,
            hmac_key=os.urandom(_THROWAWAY_KEY_BYTES),
            renderer=renderer,
            templates=texts,
        )
    finally:
        await renderer.close()
    protected = guards.Protected(namespace=settings.namespace, hmac_key_secret=settings.hmac_key_secret)
    refused = guards.protected_name(want, protected) or guards.reserved_marks(
        want, sync.spec.target, rules=reserved.parse_rules(settings.forbidden_target_keys)
    )
    if refused is not None:
        raise refused
    return want
