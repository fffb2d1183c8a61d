"""Infisical's operator CRDs as pydantic models, so that a field they do not define is reported.

Based on github.com/Infisical/kubernetes-operator (the ``k8-operator`` of Infisical/infisical):
``api/v1alpha1/infisicalsecret_types.go`` and ``common.go`` (commits 0d46283, 136782d), and
``api/v1beta1/infisicalstaticsecret_types.go``, ``infisicalauth_types.go`` and
``infisicalconnection_types.go`` (39ef818, 01eec1d, 009ee11), with the generated CRDs of
``config/crd/bases/``. Every field they define is declared, with Go's zero value as the default:
``extra="allow"`` keeps any other field, and :func:`unknown_fields` names it, so that nothing is
dropped silently. What has no equivalent here is declared loosely (``dict``), to be reported whole.

Infisical's operator writes its objects back with every unset struct as zero values
(``awsIamAuth: {identityId: "", ...}``), so "is this set?" is :func:`is_set`, not "is it present?".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "secrets.infisical.com"


class _Infisical(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="allow", frozen=True)


class Meta(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # uid, managedFields...: nothing to convert

    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class SecretRef(_Infisical):
    secret_name: str = ""
    secret_namespace: str = ""


class CaRef(SecretRef):
    key: str = ""


class TLS(_Infisical):
    ca_ref: CaRef = CaRef()


class NamespacedName(_Infisical):
    name: str = ""
    namespace: str = ""


class Key(NamespacedName):
    """v1beta1's reference to one key of a Secret."""

    key: str = ""


class Scope(_Infisical):
    """v1alpha1 ``secretsScope``: one folder of one environment of one project."""

    secrets_path: str = ""
    env_slug: str = ""
    secret_name: str = ""
    project_slug: str = ""
    project_id: str = ""
    recursive: bool = False


class UniversalAuth(_Infisical):
    credentials_ref: SecretRef = SecretRef()
    secrets_scope: Scope = Scope()


class KubernetesAuth(_Infisical):
    identity_id: str = ""
    service_account_ref: NamespacedName = NamespacedName()
    secrets_scope: Scope = Scope()
    auto_create_service_account_token: bool = False
    service_account_token_audiences: list[str] | None = None


class Authentication(_Infisical):
    universal_auth: UniversalAuth = UniversalAuth()
    kubernetes_auth: KubernetesAuth = KubernetesAuth()
    service_account: dict[str, Any] | None = None
    service_token: dict[str, Any] | None = None
    aws_iam_auth: dict[str, Any] | None = None
    azure_auth: dict[str, Any] | None = None
    gcp_id_token_auth: dict[str, Any] | None = None
    gcp_iam_auth: dict[str, Any] | None = None
    ldap_auth: dict[str, Any] | None = None


class TemplateMeta(_Infisical):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class Template(_Infisical):
    include_all_secrets: bool = False
    """v1alpha1 only."""
    data: dict[str, str] | str | None = None
    """Key -> Go template; v1beta1 also takes one template rendering YAML for every key."""
    metadata: TemplateMeta | None = None
    """v1alpha1 only."""
    engine_version: str = "v1"
    """v1beta1 only."""


class ManagedSecret(SecretRef):
    """v1alpha1: the Secret named, and how to write it."""

    secret_type: str = "Opaque"
    creation_policy: str = "Orphan"
    template: Template | None = None


class ManagedConfigMap(_Infisical):
    config_map_name: str = ""
    config_map_namespace: str = ""
    creation_policy: str = "Orphan"
    template: Template | None = None


class InfisicalSecretSpec(_Infisical):
    host_api: str = Field("", alias="hostAPI")
    resync_interval: int | None = None
    instant_updates: bool = False
    tls: TLS = TLS()
    authentication: Authentication = Authentication()
    token_secret_reference: dict[str, Any] | None = None
    managed_secret_reference: ManagedSecret | None = None
    managed_kube_secret_references: list[ManagedSecret] = []
    managed_kube_config_map_references: list[ManagedConfigMap] = []


class ConnectionSpec(_Infisical):
    host: str = ""
    address: str = ""
    """What the docs and newer reconcilers call ``host``."""
    tls: TLS = TLS()


class UniversalAuthV1beta1(_Infisical):
    client_id_ref: Key = Key()
    client_secret_ref: Key = Key()


class KubernetesAuthV1beta1(_Infisical):
    identity_id_ref: Key = Key()
    service_account_ref: NamespacedName = NamespacedName()
    service_account_token_audiences: list[str] | None = None


class AuthSpec(_Infisical):
    method: str = ""
    infisical_connection_ref: NamespacedName = NamespacedName()
    universal: UniversalAuthV1beta1 | None = None
    kubernetes: KubernetesAuthV1beta1 | None = None
    aws_iam: dict[str, Any] | None = None
    azure: dict[str, Any] | None = None
    gcp_id_token: dict[str, Any] | None = None
    gcp_iam: dict[str, Any] | None = None
    ldap: dict[str, Any] | None = None


class Source(_Infisical):
    project_id: str = ""
    environment_slug: str = ""
    secret_path: str = ""
    tag_slugs: list[str] = []
    recursive: bool = False


class Target(NamespacedName):
    """v1beta1: the Secret or ConfigMap named, and how to write it."""

    kind: str = "Secret"
    secret_type: str = ""
    creation_policy: str = ""
    template: Template | None = None
    metadata: TemplateMeta | None = None


class SyncOptions(_Infisical):
    refresh_interval: str = ""
    instant_updates: bool = False


class StaticSecretSpec(_Infisical):
    infisical_auth_ref: NamespacedName = NamespacedName()
    sync_options: SyncOptions = SyncOptions()
    sources: list[Source] = []
    targets: list[Target] = []


class Object(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # status, and nothing else to convert

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: Meta
    spec: _Infisical


class InfisicalSecret(Object):
    """``secrets.infisical.com/v1alpha1``: where, how to log in, what and where to write, in one."""

    spec: InfisicalSecretSpec


class InfisicalConnection(Object):
    """v1beta1: where the service is."""

    spec: ConnectionSpec


class InfisicalAuth(Object):
    """v1beta1: how to log in, through which InfisicalConnection."""

    spec: AuthSpec


class InfisicalStaticSecret(Object):
    """v1beta1: what to sync where, logged in through which InfisicalAuth."""

    spec: StaticSecretSpec


def unknown_fields(model: BaseModel, path: str) -> Iterator[str]:
    """Paths of the fields the CRDs do not define, below ``model`` (at ``path``)."""
    for key in model.model_extra or {}:
        yield f"{path}.{key}"
    for name, info in type(model).model_fields.items():
        value, where = getattr(model, name), f"{path}.{info.alias or name}"
        if isinstance(value, _Infisical):
            yield from unknown_fields(value, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, _Infisical):
                    yield from unknown_fields(item, f"{where}[{i}]")


def is_set(value: Any) -> bool:
    """Whether a value carries anything but zero values (empty strings, false, empty lists)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        return any(is_set(v) for v in value.values())
    if isinstance(value, list):
        return any(is_set(v) for v in value)
    return bool(value)
