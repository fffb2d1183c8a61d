"""secretferry.reconcile.login — how an identity's ``spec.auth`` becomes what it logs in with.

One module per login method, beside the others (import-linter keeps them independent)::

    methods          which module builds the credentials of ``spec.auth`` (one per method)
    universal        client ID + client secret, read from (opted-in) Secrets
    access_token     a ready token from a Secret (development; never renewed)
    kubernetes       a fresh ServiceAccount token the service reviews with the cluster (TokenReview)
    oidc             a fresh ServiceAccount token the service verifies by the issuer's OIDC
                     discovery document and JWKS (no call into the cluster)
    jwt              a fresh ServiceAccount token the service verifies with a JWKS URL or static keys

What they share::

    context          the identity a login is for: its label, namespace, and the clients it reads with
    secret_values    a referenced Secret's value, for a namespaced identity only from a Secret that
                     opted in (also the CA bundle's reader, ``identities``)
    service_account  the TokenRequest minter for a spec's ``serviceAccountRef`` (kubernetes, oidc,
                     jwt); the audience and opt-in rules themselves: ``reconcile.token_minting``

The lifecycle around a login (one shared session per identity, retired on change, consent and CA
watches) stays in ``reconcile.identities``; the login calls themselves in ``service.credentials``.
A new method: a module here, a branch in ``methods``, its credentials class in the service layer.
"""
