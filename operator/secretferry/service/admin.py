"""Identity auth-method removal, organization memberships and dynamic secret definitions."""

from __future__ import annotations

from secretferry.service import client_base, models, validation, wire


class _UniversalAuthEnvelope(models.ApiModel):
    identity_universal_auth: models.UniversalAuthConfig


class _KubernetesAuthEnvelope(models.ApiModel):
    identity_kubernetes_auth: models.KubernetesAuthConfig


class _MembershipEnvelope(models.ApiModel):
    membership: models.OrgMembership


class _DynamicSecretEnvelope(models.ApiModel):
    dynamic_secret: models.DynamicSecret


class AdminEndpoints(client_base.ClientBase):
    """Administrative endpoints, mixed into ``client.ServiceClient``."""

    async def remove_universal_auth(self, identity_id: str) -> models.UniversalAuthConfig:
        validation.non_empty(identity_id, field="identityId")
        envelope = await self._authed(
            _UniversalAuthEnvelope,
            "DELETE",
            f"/api/v1/auth/universal-auth/identities/{wire.segment(identity_id)}",
            "/api/v1/auth/universal-auth/identities/{identityId}",
        )
        return envelope.identity_universal_auth

    async def remove_kubernetes_auth(self, identity_id: str) -> models.KubernetesAuthConfig:
        validation.non_empty(identity_id, field="identityId")
        envelope = await self._authed(
            _KubernetesAuthEnvelope,
            "DELETE",
            f"/api/v1/auth/kubernetes-auth/identities/{wire.segment(identity_id)}",
            "/api/v1/auth/kubernetes-auth/identities/{identityId}",
        )
        return envelope.identity_kubernetes_auth

    async def delete_org_membership(self, organization_id: str, membership_id: str) -> models.OrgMembership:
        validation.non_empty(organization_id, field="organizationId")
        validation.non_empty(membership_id, field="membershipId")
        envelope = await self._authed(
            _MembershipEnvelope,
            "DELETE",
            f"/api/v2/organizations/{wire.segment(organization_id)}/memberships/{wire.segment(membership_id)}",
            "/api/v2/organizations/{organizationId}/memberships/{membershipId}",
        )
        return envelope.membership

    async def get_dynamic_secret(
        self, name: str, *, project_slug: str, environment_slug: str, path: str = "/"
    ) -> models.DynamicSecret:
        """Needs an access token like every other read (the real route runs ``verifyAuth`` and
        checks the dynamic-secrets permission): the definition's inputs are root credentials."""
        validation.non_empty(name, field="name")
        validation.non_empty(project_slug, field="projectSlug")
        validation.non_empty(environment_slug, field="environmentSlug")
        endpoint = "GET /api/v1/dynamic-secrets/{name}"
        envelope = await self._conn.call(
            _DynamicSecretEnvelope,
            "GET",
            f"/api/v1/dynamic-secrets/{wire.segment(name)}",
            endpoint=endpoint,
            token=self._required_token(endpoint),
            params=[("projectSlug", project_slug), ("environmentSlug", environment_slug), ("path", path)],
        )
        return envelope.dynamic_secret
