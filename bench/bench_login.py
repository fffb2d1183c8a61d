"""Login latency by method (universal, Kubernetes, OIDC, JWT) at the dev server, with a real control plane.

What each method costs the operator at every (re-)login, with the operator's own clients: the
service client's ``login_*`` calls (``secretferry.service.client``) and, for the methods that send a
ServiceAccount token, a fresh TokenRequest through the operator's Kubernetes client
(``secretferry.kube.tokens.request_token``), as ``reconcile.token_minting`` does at every login.
Nothing is mocked: the dev server reviews Kubernetes-auth tokens with the apiserver's TokenReview,
fetches the apiserver's OIDC discovery document and JWKS (OIDC) or its JWKS (JWT, JWKS URL) over
TLS at every login, and verifies the signature.

Run: ``.venv/bin/python bench/bench_login.py [--logins 200] [--control-plane tuned]``. The report
starts with the machine, its load, the commit and the control plane's profile.

Clocks (``time.perf_counter()`` in this process, one login at a time, the methods in turn (so a
busy moment of the shared machine weighs on all of them alike), one keep-alive connection to the
dev server and one to the apiserver, after ``--warmup`` untimed rounds):

- mint: from just before the TokenRequest is sent to the token in hand (token methods only);
- login: from just before ``POST /api/v1/auth/<method>-auth/login`` to the parsed access token:
  the dev server's whole verification (TokenReview, or discovery + JWKS fetches and the signature
  check) is inside it;
- mint + login: the two, summed per login: what the operator waits for before its first call.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from _common import RunInfo, add_control_plane_option, log, percentile, start_control_plane, table
from secretferry.devcluster import cluster
from secretferry.devserver.testing import kubernetes_auth, run_dev_server
from secretferry.kube import client as kube_client
from secretferry.kube import tokens
from secretferry.service import client as service_client

ORG = "bench-org"
PROJECT = "bench"
NAMESPACE = "bench-login"
SERVICE_ACCOUNT = "login-sa"
AUDIENCE = "secretferry-bench-login"
IDS = {
    "universal": "0f000000-0000-4000-8000-0000000000f1",
    "kubernetes": "0f000000-0000-4000-8000-0000000000f2",
    "oidc": "0f000000-0000-4000-8000-0000000000f3",
    "jwt": "0f000000-0000-4000-8000-0000000000f4",
}
CLIENT_ID, CLIENT_SECRET = "bench-client", "bench-client-secret-value"
# 200 logins per method: enough for a p99 that is not the single worst sample (it is the 2nd
# worst), and ~1 min in all on 2 loaded cores.
LOGINS = 200
WARMUP = 5
TOKEN_SECONDS = 600  # the TokenRequest minimum; each token is used once, at once


@dataclass
class Timings:
    mint: list[float] = field(default_factory=list)
    login: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)


def seed(cp: cluster.ControlPlane, reviewer_token: str) -> dict[str, object]:
    bounds = {
        "boundIssuer": cluster.ISSUER,
        "boundAudiences": AUDIENCE,
        "boundSubject": f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}",
        "accessTokenTTL": 3600,
    }
    methods: dict[str, tuple[str, dict[str, object]]] = {
        "universal": ("universalAuth", {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET}),
        "kubernetes": (
            "kubernetesAuth",
            kubernetes_auth(
                host=cp.server, ca_pem=cp.ca_pem, reviewer_token=reviewer_token, audience=AUDIENCE
            ),
        ),
        "oidc": ("oidcAuth", {"oidcDiscoveryUrl": cp.server, "caCert": cp.ca_pem, **bounds}),
        "jwt": (
            "jwtAuth",
            {
                "configurationType": "jwks",
                "jwksUrl": f"{cp.server}/openid/v1/jwks",
                "jwksCaCert": cp.ca_pem,
                **bounds,
            },
        ),
    }
    return {
        "organizations": [{"id": "0f000000-0000-4000-8000-000000000001", "name": "Bench", "slug": ORG}],
        "projects": [
            {
                "id": "0f000000-0000-4000-8000-0000000000a1",
                "slug": PROJECT,
                "name": "Bench",
                "organization": ORG,
                "environments": [{"slug": "dev", "name": "Dev"}],
            }
        ],
        "identities": [
            {
                "id": IDS[method],
                "name": method,
                "organization": ORG,
                key: block,
                "projects": [{"project": PROJECT, "role": "admin"}],
            }
            for method, (key, block) in methods.items()
        ],
    }


Login = Callable[[str], Awaitable[object]]


def logins_by_method(service: service_client.ServiceClient) -> dict[str, Login]:
    """One login per method with the operator's service client (``jwt``: the token to send)."""

    async def universal(_: str) -> object:
        return await service.login_universal(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)

    async def kubernetes(jwt: str) -> object:
        return await service.login_kubernetes(identity_id=IDS["kubernetes"], jwt=jwt)

    async def oidc(jwt: str) -> object:
        return await service.login_oidc(identity_id=IDS["oidc"], jwt=jwt)

    async def jwt_auth(jwt: str) -> object:
        return await service.login_jwt(identity_id=IDS["jwt"], jwt=jwt)

    return {"universal": universal, "kubernetes": kubernetes, "oidc": oidc, "jwt": jwt_auth}


async def measure(
    service: service_client.ServiceClient, kube: kube_client.Kube, *, logins: int, warmup: int
) -> dict[str, Timings]:
    """Round-robin over the methods, one login at a time: the machine's load (2 shared cores) then
    weighs on every method alike instead of on whichever ran during a busy minute."""

    async def mint() -> str:
        token, _ = await tokens.request_token(
            kube,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            audiences=[AUDIENCE],
            expiration_seconds=TOKEN_SECONDS,
        )
        return token

    methods = logins_by_method(service)
    results = {method: Timings() for method in methods}
    for i in range(warmup + logins):
        for method, login in methods.items():
            started = time.perf_counter()
            jwt = await mint() if method != "universal" else ""
            minted = time.perf_counter()
            await login(jwt)
            done = time.perf_counter()
            if i < warmup:
                continue
            timings = results[method]
            if method != "universal":
                timings.mint.append(minted - started)
            timings.login.append(done - minted)
            timings.total.append(done - started)
    return results


def figures(values: list[float]) -> str:
    if not values:
        return "-"
    return " / ".join(f"{percentile(values, p) * 1000:.1f}" for p in (50, 95, 99))


async def run_all(cp: cluster.ControlPlane, base_url: str, args: argparse.Namespace) -> dict[str, Timings]:
    kube = await kube_client.connect(kubeconfig=str(cp.kubeconfig))
    try:
        async with service_client.ServiceClient(base_url) as service:
            log(f"{', '.join(IDS)} in turn: {args.warmup} warm-up + {args.logins} logins each")
            return await measure(service, kube, logins=args.logins, warmup=args.warmup)
    finally:
        await kube.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logins", type=int, default=LOGINS, help="timed logins per method")
    p.add_argument("--warmup", type=int, default=WARMUP, help="untimed logins per method before them")
    add_control_plane_option(p)
    args = p.parse_args()
    if args.logins < 1 or args.warmup < 0:
        p.error("need logins >= 1 and warmup >= 0")
    run = RunInfo(args.control_plane)
    with tempfile.TemporaryDirectory(prefix="secretferry-bench-login-") as tmp:
        cp = start_control_plane(Path(tmp) / "cp", run)
        try:
            cp.kubectl("create", "namespace", NAMESPACE)
            cp.kubectl("create", "serviceaccount", SERVICE_ACCOUNT, "-n", NAMESPACE)
            reviewer = cp.reviewer_token(expiration_seconds=3600)
            with run_dev_server(seed=seed(cp, reviewer), data_dir=Path(tmp) / "devserver") as server:
                results = asyncio.run(run_all(cp, server.base_url, args))
        finally:
            cp.stop()
    print(run.header())
    print(
        f"login latency by method, {args.logins} logins each (after {args.warmup} warm-up), one at a "
        "time, the methods in turn; p50 / p95 / p99 in ms\n"
    )
    rows = [[method, figures(t.login), figures(t.mint), figures(t.total)] for method, t in results.items()]
    print(table(["method", "login", "mint (TokenRequest)", "mint + login"], rows))
    print(
        "\nlogin: the dev server's answer to the login route (Kubernetes: its TokenReview call to the "
        "apiserver; OIDC: discovery document + JWKS fetched over TLS; JWT: JWKS fetched; then the "
        "signature check). mint: the operator's TokenRequest. Universal auth mints nothing."
    )


if __name__ == "__main__":
    main()
