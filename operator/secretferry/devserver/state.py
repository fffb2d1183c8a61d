"""Everything one running app shares, reachable from handlers as a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from secretferry.devserver import admin_token, events, generations, ratelimit, webhooks
from secretferry.devserver import db as dbm
from secretferry.devserver.config import DevServerConfig
from secretferry.devserver.events import EventBus
from secretferry.devserver.faults import Faults
from secretferry.devserver.identity_store import IdentityStore
from secretferry.devserver.lease_store import LeaseStore
from secretferry.devserver.listing import Lister
from secretferry.devserver.permissions import EVENT_ACTIONS, SECRET_EVENTS, Permissions
from secretferry.devserver.stats import Stats
from secretferry.devserver.store import Store
from secretferry.devserver.tokens import Tokens


@dataclass
class DevState:
    config: DevServerConfig
    db: dbm.Database
    store: Store
    identities: IdentityStore
    tokens: Tokens
    permissions: Permissions
    lister: Lister
    bus: EventBus
    faults: Faults
    stats: Stats
    leases: LeaseStore
    """Dynamic secret leases (routes_leases)."""
    admin_token: str
    """What ``/_admin`` requires in ``X-Admin-Token``: configured, or generated at start."""
    limiter: ratelimit.RateLimiter | None = None
    """Per-IP route limits (``config.rate_limits``); None: unlimited."""
    webhooks: webhooks.WebhookStore = field(default_factory=webhooks.WebhookStore)
    """Project webhooks (devserver.webhooks): told of every change the bus publishes."""
    seen_jwts: set[str] = field(default_factory=set)
    """Digests of every ServiceAccount jwt presented at Kubernetes-auth login (reuse detection)."""

    @classmethod
    def build(cls, config: DevServerConfig) -> DevState:
        database = dbm.Database(config.data_path)
        store = Store(database)
        identities = IdentityStore(database)
        permissions = Permissions(identities)
        state = cls(
            config=config,
            db=database,
            store=store,
            identities=identities,
            tokens=Tokens(database),
            permissions=permissions,
            lister=Lister(store, permissions, unknown_environment_empty=config.unknown_environment_empty),
            bus=EventBus(
                generations.get(config.event_generation),
                may_receive=lambda sub, event, change: permissions.allowed(
                    sub.identity_id,
                    sub.project_id,
                    config.clock(),
                    action=EVENT_ACTIONS[event],
                    subject=SECRET_EVENTS,
                    environment=change.environment,
                    secret_path=change.secret_path,
                ),
            ),
            faults=Faults(config.faults),
            stats=Stats(),
            leases=LeaseStore(database),
            admin_token=admin_token.establish(config),
            limiter=ratelimit.RateLimiter(config.clock) if config.rate_limits else None,
        )
        state.bus.on_publish = state.fire_webhooks
        return state

    def fire_webhooks(self, project_id: str, changes: list[events.Change]) -> None:
        if not self.webhooks.by_id:
            return
        project = self.store.project(project_id)
        name = str(getattr(project, "name", "") or project_id)
        self.webhooks.fire(project_id, name, ((c.environment, c.secret_path) for c in changes))

    def now(self) -> float:
        return self.config.clock()


def get_state(request: Request) -> DevState:
    state: DevState = request.app.state.dev
    return state
