{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "secretferry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name, prefixed unless it already contains the chart name. */}}
{{- define "secretferry.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "secretferry.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "secretferry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "secretferry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "secretferry.labels" -}}
helm.sh/chart: {{ include "secretferry.chart" . }}
{{ include "secretferry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: secretferry
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "secretferry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "secretferry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "secretferry.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Lease the replicas elect their leader with (SECRETFERRY_PEERING) when leaderElection is on. */}}
{{- define "secretferry.leaseName" -}}
{{- default (include "secretferry.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* True ("true") when the operator serves only the namespaces in scope.namespaces. */}}
{{- define "secretferry.namespaced" -}}
{{- if .Values.scope.namespaces -}}true{{- end -}}
{{- end -}}

{{/* Guard rails that a schema cannot express across keys. */}}
{{- define "secretferry.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled=true: without a leader Lease every replica would reconcile" -}}
{{- end -}}
{{- if and .Values.quota.enabled (not .Values.scope.namespaces) -}}
{{- fail "quota.enabled needs scope.namespaces: the ResourceQuota is rendered into each served namespace" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "serviceMonitor.enabled needs metrics.enabled=true" -}}
{{- end -}}
{{- if and .Values.prometheusRule.enabled (not .Values.metrics.enabled) -}}
{{- fail "prometheusRule.enabled needs metrics.enabled=true: its alerts read the operator's metrics" -}}
{{- end -}}
{{- $minAvailable := .Values.podDisruptionBudget.minAvailable -}}
{{- $minAvailableCount := or (kindIs "float64" $minAvailable) (kindIs "int64" $minAvailable) (kindIs "int" $minAvailable) -}}
{{- if and (include "secretferry.pdbEnabled" .) $minAvailableCount (ge (int $minAvailable) (int .Values.replicaCount)) -}}
{{- fail "podDisruptionBudget.minAvailable must be below replicaCount: otherwise no operator pod can ever be evicted and node drains hang" -}}
{{- end -}}
{{- end -}}

{{/* True ("true") when a PodDisruptionBudget is rendered: `auto` means only with more than one replica. */}}
{{- define "secretferry.pdbEnabled" -}}
{{- $mode := toString .Values.podDisruptionBudget.enabled -}}
{{- if or (eq $mode "true") (and (eq $mode "auto") (gt (int .Values.replicaCount) 1)) -}}true{{- end -}}
{{- end -}}

{{/*
PromQL matchers selecting this release's series: what the chart's ServiceMonitor yields (the
`namespace` target label, and `job` from the Service's app.kubernetes.io/name via jobLabel).
*/}}
{{- define "secretferry.metricSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "namespace=%q, job=%q" .Release.Namespace (include "secretferry.name" .)) -}}
{{- end -}}

{{/*
Namespaced rules: what the operator needs in every namespace it serves (the whole cluster in
cluster-wide mode), and nothing it does not call. Kept in one place so the ClusterRole and the
per-namespace Roles cannot drift. README "RBAC" explains each rule; tests/integration/chart pins
them (render) and proves them sufficient (e2e: the operator runs with exactly these).
*/}}
{{- define "secretferry.namespacedRules" -}}
# SecretSyncs and MachineIdentities: read through our own LIST+WATCH (SecretSyncs) and kopf's
# (identities). The operator never changes their spec or metadata.
- apiGroups: ["secretferry.io"]
  resources: ["secretsyncs", "machineidentities"]
  verbs: ["list", "watch"]
# Their status: merge patches of conditions, synced keys, token expiry.
- apiGroups: ["secretferry.io"]
  resources: ["secretsyncs/status", "machineidentities/status"]
  verbs: ["patch"]
# PasswordGenerators and UUIDGenerators: read through our own LIST+WATCH, status patched. Their
# values go into Secrets of their own namespace (the Secret rules below), never anywhere else.
- apiGroups: ["secretferry.io"]
  resources: ["passwordgenerators", "uuidgenerators"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["secretferry.io"]
  resources: ["passwordgenerators/status", "uuidgenerators/status"]
  verbs: ["patch"]
# DynamicSecretLeases: kopf's watch, and patches of their metadata (its finalizer, which holds the
# object until the lease is revoked, and its progress annotations) and status.
- apiGroups: ["secretferry.io"]
  resources: ["dynamicsecretleases"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["secretferry.io"]
  resources: ["dynamicsecretleases/status"]
  verbs: ["patch"]
# PushSecrets: our own LIST+WATCH; patch for metadata.finalizers only (deletionPolicy Delete),
# never the spec; their status like the others. (Generators: get, above, for status.secretName.)
- apiGroups: ["secretferry.io"]
  resources: ["pushsecrets"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["secretferry.io"]
  resources: ["pushsecrets/status"]
  verbs: ["patch"]
# Secrets: watched by label (the managed ones; RBAC cannot narrow a list by label), read one by one
# (credential references, Merge targets), created, server-side applied (patch), and deleted only
# to replace one of ours whose type must change (a Secret's type is immutable; uid precondition).
# No update: every write is a create or a patch.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# ConfigMap targets (non-sensitive data): the same, without delete (a ConfigMap has no type).
# Both kinds are also templateFrom sources: watched and listed by the label
# secretferry.io/template-source=true, read metadata-only to tell missing from unlabelled.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Events on Ready transitions, events.k8s.io/v1 only (kopf's own event posting is off); patch:
# a repeat is counted into the Event posted first (its series), as client-go's recorder does.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.config.tokenRequestsEnabled }}
# Kubernetes auth: read a ServiceAccount's opt-in annotation (secretferry.io/allowed-identities)
# before each login, and watch those annotations (metadata only) so consent taken back ends the
# session at once; then mint one short-lived token per login (TokenRequest). Never update.
# Off with config.tokenRequestsEnabled=false (the operator then refuses Kubernetes auth itself).
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["serviceaccounts/token"]
  verbs: ["create"]
{{- end }}
{{- if .Values.config.rolloutsEnabled }}
# rolloutRestartTargets and auto-reload: list the workloads of a namespace to find the consumers of
# a Secret, and patch one annotation on a pod template. Off with config.rolloutsEnabled=false.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list", "patch"]
{{- if .Values.rbac.argoRollouts }}
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["list", "patch"]
{{- end }}
{{- end }}
{{- end -}}

{{/* Cluster-scoped rules, needed in both modes. */}}
{{- define "secretferry.clusterRules" -}}
- apiGroups: ["secretferry.io"]
  resources: ["clustermachineidentities"]
  verbs: ["list", "watch"]
- apiGroups: ["secretferry.io"]
  resources: ["clustermachineidentities/status"]
  verbs: ["patch"]
# ClusterSecretSyncs: read through our own LIST+WATCH, status patched (counts, failing namespaces).
# The operator never changes their spec. Their targets are written with the namespaced rules above
# (Secrets/ConfigMaps), in the namespaces the operator serves.
- apiGroups: ["secretferry.io"]
  resources: ["clustersecretsyncs"]
  verbs: ["list", "watch"]
- apiGroups: ["secretferry.io"]
  resources: ["clustersecretsyncs/status"]
  verbs: ["patch"]
# ClusterMachineIdentity.spec.allowedNamespaces selects namespaces by label: a metadata-only
# watch of namespaces makes a label change take effect at once (a get covers a namespace the
# watch has not delivered yet). In namespaced mode kopf also lists and watches them.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
# TemporaryPrivileges (cluster-scoped): watched, their finalizer added and removed (patch on the
# object: metadata.finalizers only), status written. Never create, update or delete: they are
# an admin's objects.
- apiGroups: ["secretferry.io"]
  resources: ["temporaryprivileges"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["secretferry.io"]
  resources: ["temporaryprivileges/status"]
  verbs: ["patch"]
# kopf watches CRDs to notice ours being (re)installed; definitions only, no custom objects.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- end -}}

{{/*
The operator container's environment as the chart sets it (deployment.yaml renders it and refuses
an extraEnv entry that repeats one of these names).
*/}}
{{- define "secretferry.env" -}}
- name: SECRETFERRY_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# The Lease holder identity; HOSTNAME is the node's name under hostNetwork, the same
# for every replica on that node (which would let two of them lead at once).
- name: SECRETFERRY_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: SECRETFERRY_WATCH_NAMESPACES
  value: {{ join "," (uniq .Values.scope.namespaces) | quote }}
- name: SECRETFERRY_WATCH_NAMESPACE_SELECTOR
  value: {{ .Values.scope.namespaceSelector | quote }}
- name: SECRETFERRY_DEFAULT_HOST_API
  value: {{ .Values.config.defaultHostAPI | quote }}
- name: SECRETFERRY_ALLOWED_HOSTS
  value: {{ join "," (uniq .Values.config.allowedHosts) | quote }}
- name: SECRETFERRY_FORBIDDEN_TARGET_KEYS
  value: {{ join "," (uniq .Values.config.forbiddenTargetKeys) | quote }}
- name: SECRETFERRY_ALLOW_INSECURE_HTTP
  value: {{ .Values.config.allowInsecureHTTP | quote }}
- name: SECRETFERRY_MAX_TOKEN_EXPIRATION_SECONDS
  value: {{ .Values.config.maxTokenExpirationSeconds | quote }}
- name: SECRETFERRY_SERVICE_TIMEOUT_SECONDS
  value: {{ .Values.config.serviceTimeoutSeconds | quote }}
- name: SECRETFERRY_LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: SECRETFERRY_LOG_FORMAT
  value: {{ .Values.config.logFormat | quote }}
- name: SECRETFERRY_WORKERS
  value: {{ .Values.config.workers | quote }}
- name: SECRETFERRY_STREAMING_REFRESH_INTERVAL_SECONDS
  value: {{ .Values.config.streamingRefreshIntervalSeconds | quote }}
- name: SECRETFERRY_ROLLOUT_COOLDOWN_SECONDS
  value: {{ .Values.config.rolloutCooldownSeconds | quote }}
- name: SECRETFERRY_MAX_LEASES_PER_NAMESPACE
  value: {{ .Values.config.maxLeasesPerNamespace | quote }}
- name: SECRETFERRY_ROLLOUTS_ENABLED
  value: {{ .Values.config.rolloutsEnabled | quote }}
- name: SECRETFERRY_TOKEN_REQUESTS_ENABLED
  value: {{ .Values.config.tokenRequestsEnabled | quote }}
- name: SECRETFERRY_ALLOW_PERMANENT_PRIVILEGES
  value: {{ .Values.config.allowPermanentPrivileges | quote }}
- name: SECRETFERRY_PRIVILEGE_CHECK_INTERVAL_SECONDS
  value: {{ .Values.config.privilegeCheckIntervalSeconds | quote }}
- name: SECRETFERRY_HMAC_KEY_SECRET
  value: {{ .Values.config.hmacKeySecret | quote }}
- name: SECRETFERRY_METRICS_PORT
  value: {{ ternary .Values.metrics.port 0 .Values.metrics.enabled | quote }}
- name: SECRETFERRY_WEBHOOK_PORT
  value: {{ ternary .Values.webhook.port 0 .Values.webhook.enabled | quote }}
{{- if .Values.webhook.enabled }}
# Advertised on the Lease while this replica leads: standbys relay the webhooks that reach them here.
- name: SECRETFERRY_POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
- name: SECRETFERRY_WEBHOOK_SIGNING_KEY_FILE
  value: "/etc/secretferry/webhook/signing-key"
- name: SECRETFERRY_WEBHOOK_REPLAY_WINDOW_SECONDS
  value: {{ .Values.webhook.replayWindowSeconds | quote }}
- name: SECRETFERRY_WEBHOOK_MAX_BODY_BYTES
  value: {{ .Values.webhook.maxBodyBytes | quote }}
- name: SECRETFERRY_WEBHOOK_RATE_PER_SECOND
  value: {{ .Values.webhook.ratePerSecond | quote }}
- name: SECRETFERRY_WEBHOOK_BURST
  value: {{ .Values.webhook.burst | quote }}
- name: SECRETFERRY_WEBHOOK_OVER_RATE_VERIFY_PER_SECOND
  value: {{ .Values.webhook.overRateVerifyPerSecond | quote }}
- name: SECRETFERRY_WEBHOOK_TRUSTED_PROXIES
  value: {{ join "," .Values.webhook.trustedProxies | quote }}
- name: SECRETFERRY_WEBHOOK_CLIENT_ADDRESS_HEADER
  value: {{ .Values.webhook.clientAddressHeader | quote }}
- name: SECRETFERRY_LIVENESS_PORT
  value: {{ .Values.livenessPort | quote }}
- name: SECRETFERRY_READINESS_PORT
  value: {{ .Values.readinessPort | quote }}
- name: SECRETFERRY_LISTEN_ADDRESS
  value: {{ .Values.listenAddress | quote }}
- name: SECRETFERRY_PEERING
  value: {{ ternary (include "secretferry.leaseName" .) "" .Values.leaderElection.enabled | quote }}
- name: SECRETFERRY_LEADER_LEASE_DURATION_SECONDS
  value: {{ .Values.leaderElection.leaseDurationSeconds | quote }}
- name: SECRETFERRY_LEADER_RENEW_DEADLINE_SECONDS
  value: {{ .Values.leaderElection.renewDeadlineSeconds | quote }}
- name: SECRETFERRY_LEADER_RETRY_PERIOD_SECONDS
  value: {{ .Values.leaderElection.retryPeriodSeconds | quote }}
- name: SECRETFERRY_LEADER_RELEASE_ON_SHUTDOWN
  value: {{ .Values.leaderElection.releaseOnShutdown | quote }}
# The image sets these too; repeated so a custom image cannot write outside /tmp.
- name: HOME
  value: /tmp
- name: TMPDIR
  value: /tmp
{{- end }}
