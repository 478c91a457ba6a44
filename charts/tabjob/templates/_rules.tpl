{{/*
The operator's permissions, shared by the ClusterRole (all namespaces) and the per-namespace Roles. Each rule is
explained in charts/tabjob/README.md ("Permissions"); keep the two in step with operator/tabjob/operator/RBAC.md.
Argument: a dict with `clusterWide` (bool).
*/}}
{{- define "tabjob.rules" -}}
- apiGroups: [tabjob.dev]
  resources: [tabularjobs]
  verbs: [get, list, watch, patch]
- apiGroups: [tabjob.dev]
  resources: [tabularjobs/status]
  verbs: [get, patch]
- apiGroups: [tabjob.dev]
  resources: [tabularjobs/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [configmaps, services]
  verbs: [get, list, watch, create, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [kopf.dev]
  resources: [{{ if .clusterWide }}clusterkopfpeerings{{ else }}kopfpeerings{{ end }}]
  verbs: [get, list, watch, patch]
{{- end }}
