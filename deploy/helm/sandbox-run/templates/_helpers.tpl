{{/* Names: RELEASE-sandbox-run, or the release's name when it has "sandbox-run" in it. */}}
{{- define "sandbox-run.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sandbox-run.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: (dict "ctx" $ "role" "api"|"worker"). */}}
{{- define "sandbox-run.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "sandbox-run.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The NATS URLs: natsUrl, or the bundled NATS chart's Service (its nats.fullname). */}}
{{- define "sandbox-run.natsUrl" -}}
{{- if .Values.natsUrl -}}
{{- .Values.natsUrl -}}
{{- else if .Values.nats.enabled -}}
{{- $name := "" -}}
{{- if .Values.nats.fullnameOverride -}}
{{- $name = .Values.nats.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $n := default "nats" .Values.nats.nameOverride -}}
{{- if contains $n .Release.Name -}}
{{- $name = .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name = printf "%s-%s" .Release.Name $n | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- printf "nats://%s:%d" $name (int .Values.nats.config.nats.port | default 4222) -}}
{{- else -}}
{{- fail "natsUrl is required when nats.enabled is false" -}}
{{- end -}}
{{- end -}}

{{- define "sandbox-run.apiCredsSecret" -}}
{{- .Values.credentials.api.existingSecret | default (printf "%s-api-creds" .Release.Name) -}}
{{- end -}}
{{- define "sandbox-run.workerCredsSecret" -}}
{{- .Values.credentials.worker.existingSecret | default (printf "%s-worker-creds" .Release.Name) -}}
{{- end -}}
{{- define "sandbox-run.apiKeysSecret" -}}
{{- .Values.apiKeys.existingSecret | default (printf "%s-api-keys" .Release.Name) -}}
{{- end -}}

{{/*
The environment both roles share: NATS, its TLS, the callback secret and the
extra settings. (dict "ctx" $ "creds" "/etc/sandbox-run/nats/api.creds")
*/}}
{{- define "sandbox-run.commonEnv" -}}
{{- $ := .ctx -}}
- name: SANDBOX_RUN_NATS
  value: {{ include "sandbox-run.natsUrl" $ | quote }}
- name: SANDBOX_RUN_NATS_CREDS
  value: {{ .creds | quote }}
{{- if $.Values.natsClientTLS.secretName }}
- name: SANDBOX_RUN_NATS_CA
  value: /etc/sandbox-run/nats-tls/ca.crt
{{- if $.Values.natsClientTLS.clientCert }}
- name: SANDBOX_RUN_NATS_CERT
  value: /etc/sandbox-run/nats-tls/tls.crt
- name: SANDBOX_RUN_NATS_KEY
  value: /etc/sandbox-run/nats-tls/tls.key
{{- end }}
{{- end }}
- name: SANDBOX_RUN_CALLBACK_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "sandbox-run.apiKeysSecret" $ }}
      key: callback-secret
      optional: true
{{- range $k, $v := $.Values.env }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* The TLS volume and its mount, when natsClientTLS.secretName is set. */}}
{{- define "sandbox-run.tlsVolume" -}}
{{- if .Values.natsClientTLS.secretName -}}
- name: nats-tls
  secret:
    secretName: {{ .Values.natsClientTLS.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}
{{- define "sandbox-run.tlsMount" -}}
{{- if .Values.natsClientTLS.secretName -}}
- name: nats-tls
  mountPath: /etc/sandbox-run/nats-tls
  readOnly: true
{{- end }}
{{- end -}}
