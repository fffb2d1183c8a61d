"""``secretferry convert``: Infisical operator manifests in, SecretSync / MachineIdentity YAML out.

So that a team can switch operators with the manifests it already has. Pure: no network, no
Kubernetes API, no kopf or reconcile. It reads only the manifests it is given and never the
Secrets they point at (a Secret in the input is skipped unread), so no secret value can reach its
output; where Infisical keeps a setting in a Secret (v1beta1's ``identityIdRef``, a ``clientIdRef``
apart from its ``clientSecretRef``) it prints a placeholder and a note.

Field map (sources: :mod:`.infisical`)::

    InfisicalSecret (secrets.infisical.com/v1alpha1)      ours
    spec.hostAPI (https://app.infisical.com/api)          MachineIdentity spec.hostAPI, less /api
    spec.tls.caRef {secretName, secretNamespace, key}     spec.tls.caSecretRef
    authentication.universalAuth.credentialsRef           spec.auth.universal.credentialsSecretRef
      (keys clientId / clientSecret, ours by default)
    authentication.kubernetesAuth {identityId,            spec.auth.kubernetes {identityId,
      serviceAccountRef, serviceAccountTokenAudiences}      serviceAccountRef, audiences}
    <auth>.secretsScope {projectSlug | projectId,         SecretSync spec.sources[0] {projectSlug |
      envSlug, secretsPath, recursive, secretName}          projectId, environment, path, recursive,
                                                            includeKeys: [secretName]}
    resyncInterval (seconds, default 60)                  spec.refreshInterval (1m)
    instantUpdates (default false)                        spec.instantUpdates
    managedSecretReference, managedKubeSecretReferences[] one SecretSync each, in its namespace:
      {secretName, secretNamespace, secretType,             spec.target {name, type, creationPolicy,
       creationPolicy (default Orphan)}                     deletionPolicy: Delete}
    managedKubeConfigMapReferences[]                      the same, target kind ConfigMap
    template {includeAllSecrets, data, metadata}          target.template {includeAll, data},
      (or the object's own labels and annotations)          target.labels, target.annotations

    InfisicalStaticSecret (v1beta1)                       ours
    infisicalAuthRef                                      spec.identityRef (that InfisicalAuth's)
    syncOptions {refreshInterval (60s, 1d), instantUpdates}  refreshInterval, instantUpdates
    sources[] {projectId, environmentSlug, secretPath,    sources[], in reverse order (Infisical's
      tagSlugs, recursive}                                  first source wins a key, ours the last)
    targets[] {name, namespace, kind, secretType,         one SecretSync each, as above
      creationPolicy, metadata, template {data}}
    InfisicalAuth {method universal | kubernetes}         the identity, as above; clientIdRef and
      + InfisicalConnection {host | address, tls}           clientSecretRef in one Secret become
                                                            credentialsSecretRef with their keys

Which kind of identity, and the opt-ins it needs: :mod:`.identities`. Templates: :mod:`.values`.
What happens to the existing Secrets: :mod:`.syncs`. Everything without an equivalent (the other
auth methods, service tokens, ``.SecretPath`` and Go template functions, push and dynamic
secrets, unknown fields) is a :class:`Note`, and the command exits 1 when there is one. Every
object printed has passed our own models first (``SecretSync.from_body`` and the identities').
"""

from __future__ import annotations

from secretferry.convert.dispatch import convert
from secretferry.convert.results import InputError, Manifest, Note, Result
from secretferry.convert.streams import load_documents, messages, render

__all__ = ["InputError", "Manifest", "Note", "Result", "convert", "load_documents", "messages", "render"]
