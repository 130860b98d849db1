{{/*
Naming convention (the tests rely on it): every object is named
`{{ include "promscaler.fullname" . }}<suffix>` or has a fixed name, and lives in
`{{ .Release.Namespace }}`. With release name "promscaler" in namespace "promscaler" the names are
exactly those of apiservice/.
*/}}
{{- define "promscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "promscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "promscaler.labels" -}}
helm.sh/chart: {{ include "promscaler.chart" . }}
app.kubernetes.io/part-of: promscaler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "promscaler.adapter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "promscaler.fullname" . }}-adapter
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "promscaler.adapter.labels" -}}
{{ include "promscaler.labels" . }}
app.kubernetes.io/name: {{ include "promscaler.fullname" . }}-adapter
app.kubernetes.io/component: metrics-adapter
{{- end -}}

{{- define "promscaler.adapter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-adapter" (include "promscaler.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "promscaler.adapter.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" -}}
{{- .Values.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-adapter-tls" (include "promscaler.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.adapter.configMapName" -}}
{{- default (printf "%s-adapter-config" (include "promscaler.fullname" .)) .Values.rules.existingConfigMap -}}
{{- end -}}

{{/*
The self-signed pair, generated once per render and shared by the Secret and the APIService
caBundle; reused from the existing Secret on upgrades so the caBundle does not churn.
*/}}
{{- define "promscaler.selfSignedTLS" -}}
{{- if not (hasKey .Values "_promscalerTLS") -}}
{{- $secretName := printf "%s-adapter-tls" (include "promscaler.fullname" .) -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName | default dict -}}
{{- $data := get $existing "data" | default dict -}}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") -}}
{{- $_ := set .Values "_promscalerTLS" (dict "ca" (get $data "ca.crt" | b64dec) "cert" (get $data "tls.crt" | b64dec) "key" (get $data "tls.key" | b64dec)) -}}
{{- else -}}
{{- $svc := printf "%s-adapter" (include "promscaler.fullname" .) -}}
{{- $ns := .Release.Namespace -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $ca := genCA (printf "%s.%s CA" $svc $ns) 3650 -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns (int .Values.tls.validityDays) $ca -}}
{{- $_ := set .Values "_promscalerTLS" (dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.caBundle" -}}
{{- if eq .Values.tls.mode "selfSigned" -}}
{{- include "promscaler.selfSignedTLS" . -}}
{{- index .Values "_promscalerTLS" "ca" | b64enc -}}
{{- else if eq .Values.tls.mode "secret" -}}
{{- required "tls.caBundle (base64 PEM of the CA that signed tls.existingSecret) is required with tls.mode=secret" .Values.tls.caBundle -}}
{{- end -}}
{{- end -}}
