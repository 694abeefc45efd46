{{/* Names and labels, as `helm create` makes them. */}}
{{- define "mcpgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcpgate.fullname" -}}
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

{{- define "mcpgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcpgate.labels" -}}
helm.sh/chart: {{ include "mcpgate.chart" . }}
{{ include "mcpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: mcpgate
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcpgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read their keys from: the operator's, or the chart's. */}}
{{- define "mcpgate.secretName" -}}
{{- default (include "mcpgate.fullname" .) .Values.existingSecret }}
{{- end }}

{{- define "mcpgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The gateway's configuration, as YAML. `${VAR}` is left for the gateway to read from the pod's environment at
start (src/config/interpolate.ts), so that no secret is in the ConfigMap. gateway.extra is merged over it.
*/}}
{{- define "mcpgate.config" -}}
{{- $v := .Values -}}
{{- $security := dict "allowedHosts" $v.gateway.allowedHosts "allowedOrigins" $v.gateway.allowedOrigins "trustedProxies" $v.gateway.trustedProxies -}}
{{- $cluster := dict "replicaId" "${HOSTNAME}" "sessionKey" "${MCPGATE_SESSION_KEY}" -}}
{{- if $v.redis.enabled }}
{{- $_ := set $cluster "redis" (dict "url" "${MCPGATE_REDIS_URL}") -}}
{{- end }}
{{- $gateway := dict
  "name" $v.gateway.name
  "mode" "production"
  "logLevel" $v.gateway.logLevel
  "listen" (dict "host" "0.0.0.0" "port" (int $v.containerPort))
  "store" "${MCPGATE_STORE_URL}"
  "auth" (dict "mode" "apiKey" "keySecret" "${MCPGATE_KEY_SECRET}")
  "admin" (dict "token" "${MCPGATE_ADMIN_TOKEN:-}")
  "mrtr" (dict "stateKey" "${MCPGATE_STATE_KEY}")
  "receipts" (dict "signingKey" "${MCPGATE_RECEIPT_SIGNING_KEY}")
  "limits" (dict "shutdownDelayMs" (int64 $v.gateway.shutdownDelayMs) "shutdownGraceMs" (int64 $v.gateway.shutdownGraceMs))
  "security" $security
  "cluster" $cluster
-}}
{{- with $v.gateway.publicUrl }}
{{- $_ := set $gateway "publicUrl" . -}}
{{- end }}
{{- $gateway = mustMergeOverwrite $gateway (deepCopy $v.gateway.extra) -}}
{{- toYaml (dict "gateway" $gateway "servers" $v.servers) }}
{{- end }}

{{/*
terminationGracePeriodSeconds: the configured one, which must exceed the drain, or the drain plus 5 s. The drain
is the preStop sleep, then shutdownDelayMs and shutdownGraceMs, then the gateway's own 10 s for sessions and
children (src/cli/main.ts exits by force after delay + grace + 10 s).
*/}}
{{- define "mcpgate.terminationGracePeriodSeconds" -}}
{{- $config := include "mcpgate.config" . | fromYaml -}}
{{- $limits := $config.gateway.limits | default dict -}}
{{- $drainMs := add (int64 (default 0 $limits.shutdownDelayMs)) (int64 (default 0 $limits.shutdownGraceMs)) -}}
{{- $drain := add (int64 .Values.drain.preStopSleepSeconds) (div (add $drainMs 999) 1000) 10 -}}
{{- if kindIs "invalid" .Values.drain.terminationGracePeriodSeconds -}}
{{- add $drain 5 -}}
{{- else if le (int64 .Values.drain.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "drain.terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + (shutdownDelayMs + shutdownGraceMs) / 1000 + 10 = %d, or the kubelet kills the gateway mid-drain" .Values.drain.terminationGracePeriodSeconds $drain) -}}
{{- else -}}
{{- int64 .Values.drain.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end }}

{{/*
One key of the chart's Secret, base64: the value given, else the one already in the cluster, else `generate`
(a function of nothing, drawn once per install). Arguments: (list $existingData "key" $given $generated).
*/}}
{{- define "mcpgate.secretEntry" -}}
{{- $existing := index . 0 -}}
{{- $key := index . 1 -}}
{{- $given := index . 2 -}}
{{- $generated := index . 3 -}}
{{- if $given -}}
{{- $given | b64enc -}}
{{- else if hasKey $existing $key -}}
{{- index $existing $key -}}
{{- else -}}
{{- $generated | b64enc -}}
{{- end -}}
{{- end }}

{{/* An env entry read from the Secret. Arguments: (list $ "ENV_NAME" "secret-key" optional). */}}
{{- define "mcpgate.secretEnv" -}}
{{- $root := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "mcpgate.secretName" $root }}
      key: {{ index . 2 }}
{{- if index . 3 }}
      optional: true
{{- end }}
{{- end }}
