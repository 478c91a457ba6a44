{{/*
The operator's permissions, shared by the ClusterRole (all namespaces) and the per-namespace Roles. Each rule is
explained in charts/tabjob/README.md ("Permissions"); keep the two in step with operator/tabjob/controller/RBAC.md.
Argument: a dict with `clusterWide` (bool) and `kueue` (bool: read Kueue's Workloads, values kueue.enabled).
*/}}
{{- define "tabjob.rules" -}}
- apiGroups: [tabjob.dev]
  resources: [tabularjobs]
  verbs: [get, list, watch, delete]
- apiGroups: [tabjob.dev]
  resources: [tabularjobs/status]
  verbs: [patch]
- apiGroups: [tabjob.dev]
  resources: [tabularjobs/finalizers]
  verbs: [update]
- apiGroups: [tabjob.dev]
  resources: [tabularpredictions]
  verbs: [get, list, watch, delete]
- apiGroups: [tabjob.dev]
  resources: [tabularpredictions/status]
  verbs: [patch]
- apiGroups: [tabjob.dev]
  resources: [tabularpredictions/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .kueue }}
# Kueue admits the pods of jobs that name a queue; the operator only reads their Workloads (the Admitted condition).
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [get, list, watch]
# Kueue's Stopped events on a running group's pods that went while the operator was down: an eviction, not a failure.
- apiGroups: [""]
  resources: [events]
  verbs: [list]
{{- end }}
{{- if .clusterWide }}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
{{- end }}
