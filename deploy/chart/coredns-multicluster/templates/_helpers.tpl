{{/* The chart's name: the app.kubernetes.io/name label. */}}
{{- define "coredns-multicluster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The objects' name: the release name when it contains the chart's name (so
`helm install coredns-multicluster` names everything coredns-multicluster,
as deploy/ does), else <release>-<chart>.
*/}}
{{- define "coredns-multicluster.fullname" -}}
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

{{/* The labels that select the pods (Deployment, Service, PDB, spread). */}}
{{- define "coredns-multicluster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coredns-multicluster.name" . }}
{{- if .Values.chartLabels }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end }}

{{/* The labels of the objects that make up the DNS server; with chartLabels,
those of a Helm release too. */}}
{{- define "coredns-multicluster.labels" -}}
{{ include "coredns-multicluster.selectorLabels" . }}
app.kubernetes.io/component: dns
{{- if .Values.chartLabels }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is set. */}}
{{- define "coredns-multicluster.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the pods run as: serviceAccount.name, else the
objects' name when the chart creates it, else "default". */}}
{{- define "coredns-multicluster.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "coredns-multicluster.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}
