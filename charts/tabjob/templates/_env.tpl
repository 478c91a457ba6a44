{{/*
The operator's settings. Names match operator/tabjob/operator/config.py; tests/chart/test_chart_env.py fails when
the chart sets a variable the operator does not read.
*/}}
{{- define "tabjob.operatorEnv" -}}
- name: TABJOB_OPERATOR_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: TABJOB_OPERATOR_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: TABJOB_LOG_LEVEL
  value: {{ .Values.operator.logLevel | quote }}
- name: TABJOB_HEALTH_PORT
  value: {{ .Values.operator.healthPort | quote }}
- name: TABJOB_METRICS_PORT
  # 0 turns the metrics endpoint off.
  value: {{ ternary .Values.metrics.port 0 .Values.metrics.enabled | quote }}
- name: TABJOB_PEERING_NAME
  value: {{ include "tabjob.peeringName" . | quote }}
- name: TABJOB_PEERING_PRIORITY
  value: {{ .Values.peering.priority | quote }}
- name: TABJOB_TRAINER_IMAGE
  value: {{ include "tabjob.trainerImage" . | quote }}
- name: TABJOB_IMAGE_PULL_POLICY
  value: {{ .Values.trainer.image.pullPolicy | quote }}
- name: TABJOB_TRAINER_IMAGE_PULL_SECRETS
  value: {{ join "," .Values.trainer.imagePullSecrets | quote }}
- name: TABJOB_RUN_AS_USER
  value: {{ .Values.trainer.runAsUser | quote }}
- name: TABJOB_GPU_RESOURCE
  value: {{ .Values.trainer.gpuResource | quote }}
- name: TABJOB_ON_GPU_UNAVAILABLE
  value: {{ .Values.trainer.onGpuUnavailable | quote }}
- name: TABJOB_BACKOFF_LIMIT
  value: {{ .Values.trainer.backoffLimit | quote }}
- name: TABJOB_TTL_SECONDS_AFTER_FINISHED
  value: {{ .Values.trainer.ttlSecondsAfterFinished | quote }}
{{- end }}
