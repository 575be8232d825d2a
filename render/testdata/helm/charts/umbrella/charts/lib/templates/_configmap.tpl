{{- define "lib.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}
data:
  {{- toYaml .data | nindent 2 }}
  from: |
    the library
{{- end -}}
