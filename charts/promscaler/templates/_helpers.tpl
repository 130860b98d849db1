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
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
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
{{- if eq (include "promscaler.tlsMode" .) "secret" -}}
{{- .Values.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-adapter-tls" (include "promscaler.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.adapter.configMapName" -}}
{{- default (printf "%s-adapter-config" (include "promscaler.fullname" .)) (.Values.rules.existing | default .Values.rules.existingConfigMap) -}}
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
{{- $mode := include "promscaler.tlsMode" . -}}
{{- if eq $mode "selfSigned" -}}
{{- include "promscaler.selfSignedTLS" . -}}
{{- index .Values "_promscalerTLS" "ca" | b64enc -}}
{{- else if eq $mode "provided" -}}
{{- required "tls.ca (PEM) is required with tls.enable" .Values.tls.ca | b64enc -}}
{{- else if eq $mode "secret" -}}
{{- required "tls.caBundle (base64 PEM of the CA that signed tls.existingSecret) is required with tls.mode=secret" .Values.tls.caBundle -}}
{{- end -}}
{{- end -}}

{{/*
prometheus-adapter chart keys (top-level replicas, logLevel, listenPort, resources, ...; see
values.yaml) laid over adapter.*: the adapter's effective settings, as YAML. Templates read
`include "promscaler.adapter" . | fromYaml` instead of .Values.adapter.
*/}}
{{- define "promscaler.adapter" -}}
{{- $a := deepCopy .Values.adapter -}}
{{- $v := .Values -}}
{{- range $from, $to := dict "replicas" "replicas" "logLevel" "logVerbosity" "metricsRelistInterval" "metricsRelistInterval" "listenPort" "securePort" "resources" "resources" "nodeSelector" "nodeSelector" "tolerations" "tolerations" "affinity" "affinity" "topologySpreadConstraints" "topologySpreadConstraints" "priorityClassName" "priorityClassName" "podLabels" "podLabels" "podAnnotations" "podAnnotations" -}}
{{- if not (kindIs "invalid" (index $v $from)) -}}
{{- $_ := set $a $to (index $v $from) -}}
{{- end -}}
{{- end -}}
{{- with $v.podSecurityContext -}}
{{- $_ := set $a "securityContext" (merge (deepCopy .) $a.securityContext) -}}
{{- end -}}
{{- with $v.podDisruptionBudget -}}
{{- $pdb := dict "enabled" (default false .enabled) -}}
{{- if not (kindIs "invalid" .minAvailable) }}{{ $_ := set $pdb "minAvailable" .minAvailable }}{{ end -}}
{{- if and (kindIs "invalid" .minAvailable) (not (kindIs "invalid" .maxUnavailable)) }}{{ $_ := set $pdb "maxUnavailable" .maxUnavailable }}{{ end -}}
{{- $_ := set $a "podDisruptionBudget" $pdb -}}
{{- end -}}
{{- $_ := set $a "extraArgs" (concat $a.extraArgs ($v.extraArguments | default list)) -}}
{{- toYaml $a -}}
{{- end -}}

{{/* Prometheus' URL: prometheus.url (templated, as in prometheus-adapter's chart), then :port and path when set. */}}
{{- define "promscaler.prometheusURL" -}}
{{- $p := .Values.prometheus -}}
{{- tpl $p.url . -}}{{- with $p.port -}}:{{ . }}{{- end -}}{{- $p.path | default "" -}}
{{- end -}}

{{/*
The TLS mode in effect: prometheus-adapter's tls.enable (certificate, key and CA given as PEM in
values) and certManager.enabled map onto "provided" and "certManager".
*/}}
{{- define "promscaler.tlsMode" -}}
{{- if .Values.tls.enable -}}provided
{{- else if .Values.certManager.enabled -}}certManager
{{- else -}}{{ .Values.tls.mode }}
{{- end -}}
{{- end -}}

{{/*
The adapter's rules file. rules.config as-is, unless a prometheus-adapter style key is set
(rules.default, .custom, .external, .resource): then the file is built as that chart builds it.
*/}}
{{- define "promscaler.rulesConfig" -}}
{{- $r := .Values.rules -}}
{{- if or $r.default $r.custom $r.external $r.resource -}}
{{- $cfg := dict -}}
{{- $rules := list -}}
{{- if $r.default -}}
{{- $rules = concat $rules (.Files.Get "files/prometheus-adapter-default-rules.yaml" | fromYamlArray) -}}
{{- end -}}
{{- $rules = concat $rules ($r.custom | default list) -}}
{{- if $rules }}{{ $_ := set $cfg "rules" $rules }}{{ end -}}
{{- with $r.external }}{{ $_ := set $cfg "externalRules" . }}{{ end -}}
{{- with $r.resource }}{{ $_ := set $cfg "resourceRules" . }}{{ end -}}
{{- toYaml $cfg -}}
{{- else -}}
{{- toYaml $r.config -}}
{{- end -}}
{{- end -}}
