{{/* The chart's name, for app.kubernetes.io/name (the ServiceMonitor makes it the job name). */}}
{{- define "the.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: the release name when it already holds the chart's name (so a release
called topology-hints-exporter names its objects as deploy/base does), else RELEASE-NAME.
*/}}
{{- define "the.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "the.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "the.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "the.labels" -}}
helm.sh/chart: {{ include "the.chart" . }}
{{ include "the.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: topology-hints-exporter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that tell this release's objects apart (selectors use them). */}}
{{- define "the.selectorLabels" -}}
app.kubernetes.io/name: {{ include "the.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "the.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "the.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* image: REPOSITORY@DIGEST when a digest is given, else REPOSITORY:TAG (tag: appVersion). */}}
{{- define "the.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The `serve` command line: the flags of `topology-hints-exporter serve --help`. */}}
{{- define "the.args" -}}
- serve
- --listen-address=:{{ .Values.containerPort }}
{{- if .Values.sharding.enabled }}
- --shard=auto
- --total-shards={{ .Values.replicas }}
{{- end }}
{{- with .Values.externalUrl }}
- --external-url={{ . }}
{{- end }}
{{- if .Values.allServices }}
- --all-services
{{- end }}
{{- with .Values.namespaces }}
- --namespaces={{ join "," . }}
{{- end }}
{{- with .Values.namespacesExclude }}
- --namespaces-exclude={{ join "," . }}
{{- end }}
{{- with .Values.metricAllowlist }}
- --metric-allowlist={{ join "," . }}
{{- end }}
{{- with .Values.metricDenylist }}
- --metric-denylist={{ join "," . }}
{{- end }}
{{- with .Values.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- with .Values.logFormat }}
- --log-format={{ . }}
{{- end }}
{{- if .Values.dataplaneDetection.enabled }}
{{- if .Values.dataplanes }}
{{- fail "dataplanes: leave it empty with dataplaneDetection.enabled, which sets --dataplane=auto" }}
{{- end }}
- --dataplane=auto
{{- else if .Values.dataplanes }}
- --dataplane={{ join "," .Values.dataplanes }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}
