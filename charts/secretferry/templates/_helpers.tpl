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
{{- if and .Values.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "serviceMonitor.enabled needs metrics.enabled=true" -}}
{{- end -}}
{{- end -}}

{{/*
Namespaced rules: what the operator needs in every namespace it serves (the whole cluster in
cluster-wide mode). Kept in one place so the ClusterRole and the per-namespace Roles cannot drift.
*/}}
{{- define "secretferry.namespacedRules" -}}
# The operator's own kinds: read, and patch (finalizers, annotations) and status writes.
- apiGroups: ["secretferry.io"]
  resources: ["secretsyncs", "machineidentities"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["secretferry.io"]
  resources: ["secretsyncs/status", "machineidentities/status"]
  verbs: ["get", "patch", "update"]
# Targets: the Secrets (and ConfigMaps for non-sensitive data) it writes, and credentials it reads.
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Events on transitions (core and events.k8s.io, whichever the client posts).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# Kubernetes auth: a fresh ServiceAccount token per login (TokenRequest).
- apiGroups: [""]
  resources: ["serviceaccounts/token"]
  verbs: ["create"]
# rolloutRestartTargets: patch the pod template annotation.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["get", "list", "watch", "patch"]
{{- if .Values.rbac.argoRollouts }}
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get", "list", "patch"]
{{- end }}
{{- end -}}

{{/* Cluster-scoped rules, needed in both modes. */}}
{{- define "secretferry.clusterRules" -}}
- apiGroups: ["secretferry.io"]
  resources: ["clustermachineidentities"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["secretferry.io"]
  resources: ["clustermachineidentities/status"]
  verbs: ["get", "patch", "update"]
# ClusterMachineIdentity.spec.allowedNamespaces selects namespaces by label; kopf observes them too.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
# kopf's resource discovery, and detecting whether Argo Rollouts is installed.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
{{- end -}}
