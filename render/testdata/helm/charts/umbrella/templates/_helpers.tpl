{{- define "umbrella.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
env: {{ .Values.global.env }}
{{- range $k, $v := .Values.global.labels }}
{{ $k }}: {{ $v }}
{{- end }}
{{- end -}}
