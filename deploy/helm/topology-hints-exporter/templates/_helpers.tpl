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

{{/*
Every string a template writes goes through `quote` or `toYaml` (tests/helm/test_quoting.py
reads the templates for it): a value never becomes YAML of its own, whatever values.schema.json
lets through. The helpers that return one value (the.name, the.fullname, the.chart, the.image,
the.serviceAccountName) are quoted where they are used; the ones below write YAML.
*/}}

{{/* Labels every object carries. */}}
{{- define "the.labels" -}}
helm.sh/chart: {{ include "the.chart" . | quote }}
{{ include "the.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/part-of: topology-hints-exporter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that tell this release's objects apart (selectors use them). */}}
{{- define "the.selectorLabels" -}}
app.kubernetes.io/name: {{ include "the.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
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

{{/* The `serve` command line: the flags of `topology-hints-exporter serve --help`, one quoted
argument each (a list joined with commas is still one argument). */}}
{{- define "the.args" -}}
- "serve"
- {{ printf "--listen-address=:%d" (int .Values.containerPort) | quote }}
{{- if .Values.sharding.enabled }}
- "--shard=auto"
- {{ printf "--total-shards=%d" (int .Values.replicas) | quote }}
{{- end }}
{{- with .Values.externalUrl }}
- {{ printf "--external-url=%s" . | quote }}
{{- end }}
{{- if .Values.allServices }}
- "--all-services"
{{- end }}
{{- with .Values.namespaces }}
- {{ printf "--namespaces=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.namespacesExclude }}
- {{ printf "--namespaces-exclude=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.metricAllowlist }}
- {{ printf "--metric-allowlist=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.metricDenylist }}
- {{ printf "--metric-denylist=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.logLevel }}
- {{ printf "--log-level=%s" . | quote }}
{{- end }}
{{- with .Values.logFormat }}
- {{ printf "--log-format=%s" . | quote }}
{{- end }}
{{- if .Values.dataplaneDetection.enabled }}
{{- if .Values.dataplanes }}
{{- fail "dataplanes: leave it empty with dataplaneDetection.enabled, which sets --dataplane=auto" }}
{{- end }}
- "--dataplane=auto"
{{- else if .Values.dataplanes }}
- {{ printf "--dataplane=%s" (join "," .Values.dataplanes) | quote }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}
