{{/*
The operator's environment: the names operator/tabjob/controller/config.py reads. tests/chart/test_chart_env.py fails
when the chart sets a variable the operator package never reads, so nothing here is decoration.
*/}}
{{- define "tabjob.operatorEnv" -}}
- name: TABJOB_TRAINER_IMAGE
  value: {{ include "tabjob.trainerImage" . | quote }}
- name: TABJOB_IMAGE_PULL_POLICY
  value: {{ .Values.trainer.image.pullPolicy | quote }}
- name: TABJOB_RUN_AS_USER
  value: {{ .Values.trainer.runAsUser | quote }}
- name: TABJOB_RENDEZVOUS_PORT
  value: {{ .Values.trainer.rendezvousPort | quote }}
- name: TABJOB_PROGRESS_PORT
  value: {{ .Values.trainer.progressPort | quote }}
- name: TABJOB_METRICS_PORT
  value: {{ .Values.trainer.metricsPort | quote }}
- name: TABJOB_PROGRESS_INTERVAL
  value: {{ .Values.operator.progressInterval | quote }}
- name: TABJOB_RETRY_BASE_DELAY
  value: {{ .Values.operator.retryBaseDelay | quote }}
- name: TABJOB_RETRY_MAX_DELAY
  value: {{ .Values.operator.retryMaxDelay | quote }}
- name: TABJOB_API_QPS
  value: {{ .Values.operator.apiQps | quote }}
- name: TABJOB_API_BURST
  value: {{ .Values.operator.apiBurst | quote }}
- name: TABJOB_IMAGE_PULL_TIMEOUT
  value: {{ .Values.operator.imagePullTimeout | quote }}
- name: TABJOB_LOST_POD_TIMEOUT
  value: {{ .Values.operator.lostPodTimeout | quote }}
- name: TABJOB_UNSCHEDULABLE_GRACE
  value: {{ .Values.operator.unschedulableGrace | quote }}
- name: TABJOB_KUEUE
  value: {{ ternary "1" "0" .Values.kueue.enabled | quote }}
# The platform's policy: its ConfigMap, mounted (deployment.yaml); the ValidatingAdmissionPolicy holds the same data.
- name: TABJOB_POLICY_DIR
  value: /etc/tabjob/policy
# Leader election: `tabjob operator --leader-elect` and its Lease settings read these.
- name: TABJOB_LEADER_ELECTION
  value: {{ ternary "true" "" .Values.leaderElection.enabled | quote }}
- name: TABJOB_LEASE_NAME
  value: {{ include "tabjob.leaseName" . | quote }}
- name: TABJOB_LEASE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: TABJOB_LEASE_DURATION
  value: {{ .Values.leaderElection.leaseDuration | quote }}
- name: TABJOB_RENEW_DEADLINE
  value: {{ .Values.leaderElection.renewDeadline | quote }}
- name: TABJOB_RETRY_PERIOD
  value: {{ .Values.leaderElection.retryPeriod | quote }}
# The Lease holder's identity and the Events' reportingInstance.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
