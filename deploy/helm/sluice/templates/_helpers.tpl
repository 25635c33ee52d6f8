{{/* sluice.name is the chart's name, or nameOverride. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
sluice.fullname names every object: fullnameOverride, else the release name
when it already contains the chart's name, else release-chart; at most 63
characters (a DNS label).
*/}}
{{- define "sluice.fullname" -}}
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

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* sluice.configMapName is the ConfigMap of the policy file, "" for none. */}}
{{- define "sluice.configMapName" -}}
{{- if .Values.config.existingConfigMap }}
{{- .Values.config.existingConfigMap }}
{{- else if .Values.config.policies }}
{{- include "sluice.fullname" . }}
{{- end }}
{{- end }}

{{/* sluice.secretName is the Secret the pods mount: the user's or the chart's. */}}
{{- define "sluice.secretName" -}}
{{- default (include "sluice.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/*
sluice.secretParts lists, as YAML, each part of secrets in use: the Secret's
key, the file it becomes under /etc/sluice/secrets, and the flag naming that
file. A part is in use when its value is set, or with existingSecret when
existingSecretKeys names its key.
*/}}
{{- define "sluice.secretParts" -}}
{{- $keys := default dict .Values.secrets.existingSecretKeys }}
{{- range list (list "requirepass" "requirepass" "--requirepass-file") (list "adminPass" "admin-pass" "--admin-pass-file") (list "aclfile" "users.acl" "--aclfile") (list "storePassword" "store-pass" "--store-pass-file") (list "sentinelPassword" "sentinel-pass" "--sentinel-pass-file") }}
{{- $key := "" }}
{{- if $.Values.secrets.existingSecret }}
{{- $key = index $keys (index . 0) | default "" }}
{{- else if index $.Values.secrets (index . 0) }}
{{- $key = index . 1 }}
{{- end }}
{{- if $key }}
- name: {{ index . 0 }}
  key: {{ $key | quote }}
  path: {{ index . 1 }}
  flag: {{ index . 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
sluice.validate fails the render, with the value to change, on values that
sluice would refuse at start or that would silently do nothing.
*/}}
{{- define "sluice.validate" -}}
{{- $s := .Values.store }}
{{- $stores := 0 }}
{{- range list $s.cluster $s.redis $s.sentinel }}{{ if . }}{{ $stores = add1 $stores }}{{ end }}{{ end }}
{{- if gt $stores 1 }}
{{- fail "store: give at most one of store.cluster, store.redis and store.sentinel" }}
{{- end }}
{{- $sec := .Values.secrets }}
{{- $parts := include "sluice.secretParts" . | fromYamlArray }}
{{- $used := dict }}
{{- range $parts }}{{ $_ := set $used .name true }}{{ end }}
{{- if $sec.existingSecret }}
{{- range list "requirepass" "adminPass" "aclfile" "storePassword" "sentinelPassword" }}
{{- if index $sec . }}
{{- fail (printf "secrets: secrets.%s is set beside secrets.existingSecret; put it in that Secret and name its key in secrets.existingSecretKeys.%s" . .) }}
{{- end }}
{{- end }}
{{- if not $parts }}
{{- fail "secrets: secrets.existingSecret is set but secrets.existingSecretKeys names none of its keys" }}
{{- end }}
{{- end }}
{{- if and $used.aclfile (or $used.requirepass $used.adminPass) }}
{{- fail "secrets: aclfile and requirepass/adminPass are exclusive (sluice refuses both): give the default and admin users their passwords in the aclfile" }}
{{- end }}
{{- if and (or $used.storePassword $s.user) (eq $stores 0) }}
{{- fail "store: store.user or secrets.storePassword is set but no store is (store.cluster, store.redis or store.sentinel)" }}
{{- end }}
{{- if and (or $used.sentinelPassword $s.sentinelUser) (not $s.sentinel) }}
{{- fail "store: store.sentinelUser or secrets.sentinelPassword is set without store.sentinel" }}
{{- end }}
{{- if and $s.redis (regexMatch "^rediss?://[^/@]*:[^/@]*@" $s.redis) }}
{{- fail "store: store.redis holds a password, which would show in the pod's args: put it in secrets.storePassword" }}
{{- end }}
{{- $ports := list (int .Values.ports.resp) (int .Values.ports.admin) }}
{{- if .Values.http.enabled }}{{ $ports = append $ports (int .Values.http.port) }}{{ end }}
{{- if .Values.grpc.enabled }}{{ $ports = append $ports (int .Values.grpc.port) }}{{ end }}
{{- range $ports }}
{{- if or (lt . 1) (gt . 65535) }}
{{- fail (printf "ports: %d is not a TCP port (1-65535)" .) }}
{{- end }}
{{- end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "ports: two doors on one port: %v" $ports) }}
{{- end }}
{{- $managed := dict "listen" "ports.resp" "admin" "ports.admin" "http" "http" "grpc" "grpc" "cluster" "store.cluster" "redis" "store.redis" "sentinel" "store.sentinel" "store-user" "store.user" "sentinel-user" "store.sentinelUser" "store-tls" "store.tls" "timeout" "store.timeout" "config" "config" "requirepass" "secrets.requirepass" "requirepass-file" "secrets.requirepass" "admin-pass" "secrets.adminPass" "admin-pass-file" "secrets.adminPass" "aclfile" "secrets.aclfile" "store-pass-file" "secrets.storePassword" "sentinel-pass-file" "secrets.sentinelPassword" "log-format" "log.format" "log-level" "log.level" }}
{{- range .Values.extraArgs }}
{{- $name := regexReplaceAll "^--([^=]*).*$" (toString .) "${1}" }}
{{- with index $managed $name }}
{{- fail (printf "extraArgs: --%s is the chart's: set %s instead" $name .) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling: autoscaling.minReplicas is above autoscaling.maxReplicas" }}
{{- end }}
{{- end }}
