{{/* Names, labels and mode switches shared by the templates. */}}

{{- define "coder-k8s.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "coder-k8s.fullname" -}}
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

{{- define "coder-k8s.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coder-k8s.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "coder-k8s.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "coder-k8s.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "coder-k8s.serviceAccountName" -}}
{{- default (include "coder-k8s.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "coder-k8s.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when the mode runs the controllers. */}}
{{- define "coder-k8s.runsControllers" -}}
{{- if has .Values.mode (list "all" "controller") }}true{{ end }}
{{- end }}

{{/* "true" when the mode runs the aggregated API server. */}}
{{- define "coder-k8s.runsAggregatedAPI" -}}
{{- if has .Values.mode (list "all" "aggregated-apiserver") }}true{{ end }}
{{- end }}

{{/* "true" when the APIService (and its Service) are installed: a mode with the aggregated API, and opted in. */}}
{{- define "coder-k8s.installsAPIService" -}}
{{- if and (include "coder-k8s.runsAggregatedAPI" .) .Values.aggregatedAPI.apiService.enabled }}true{{ end }}
{{- end }}

{{/* The number of pods: replicas, or by default 2 where the pods serve the aggregated API (the APIService stays
Available while one restarts) and 1 in controller mode. */}}
{{- define "coder-k8s.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}{{ if include "coder-k8s.runsAggregatedAPI" . }}2{{ else }}1{{ end }}{{ else }}{{ int .Values.replicas }}{{ end }}
{{- end }}
