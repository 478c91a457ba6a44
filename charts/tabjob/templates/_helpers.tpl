{{/* Names follow the `helm create` conventions so labels and selectors look familiar. */}}
{{- define "tabjob.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tabjob.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tabjob.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tabjob.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tabjob
{{- end }}

{{- define "tabjob.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tabjob.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "tabjob.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tabjob.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The policy ConfigMap (namespaced) and the admission policy and binding (cluster-scoped) share this name. */}}
{{- define "tabjob.policyName" -}}
{{- printf "%s-policy" (include "tabjob.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The policy values as flat strings (comma lists; empty: no ceiling): the ConfigMap's data, and the admission
policy's first variable. */}}
{{- define "tabjob.policyData" -}}
{{- $max := .Values.policy.maxResources | default dict -}}
priorityClasses: {{ join "," .Values.policy.priorityClasses | quote }}
tolerationKeys: {{ join "," .Values.policy.tolerationKeys | quote }}
serviceAccounts: {{ join "," .Values.policy.serviceAccounts | quote }}
volumeSources: {{ join "," .Values.policy.volumeSources | quote }}
maxCpus: {{ if kindIs "invalid" $max.cpus }}""{{ else }}{{ int $max.cpus | toString | quote }}{{ end }}
maxGpus: {{ if kindIs "invalid" $max.gpus }}""{{ else }}{{ $max.gpus | toString | quote }}{{ end }}
maxMemory: {{ $max.memory | default "" | quote }}
{{- end }}

{{- define "tabjob.leaseName" -}}
{{- default (include "tabjob.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* image: a digest pins by content and wins over the tag; the tag defaults to the chart's appVersion. */}}
{{- define "tabjob.operatorImage" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "tabjob.trainerImage" -}}
{{- printf "%s:%s" .Values.trainer.image.repository (default .Chart.AppVersion .Values.trainer.image.tag) }}
{{- end }}

{{/* The namespaces RBAC objects go to: the watched list, or nil for cluster-wide. */}}
{{- define "tabjob.clusterWide" -}}
{{- if not .Values.watchNamespaces }}true{{ end }}
{{- end }}
