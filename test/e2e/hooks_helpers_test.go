package e2e

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hookedApp is the chart's release: a Deployment that mounts the Secret its
// pre-install hook makes, and a ConfigMap of the greeting; values.extra adds a
// ConfigMap that a later render can drop, values.claim a PersistentVolumeClaim that
// stays Pending until the test binds it.
const hookedApp = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: app
          image: busybox
          volumeMounts: [{name: setup, mountPath: /etc/setup}]
      volumes:
        - name: setup
          secret: {secretName: {{ .Release.Name }}-setup}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
{{- if .Values.extra }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-extra
data: {extra: "yes"}
{{- end }}
{{- if .Values.claim }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ .Release.Name }}-data
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: none
  resources: {requests: {storage: 1Gi}}
{{- end }}
`

// hookedHooks are its hooks. Install: the Secret (weight -5), then a Job that kwok
// completes, and once the release is healthy a ConfigMap. Upgrade: the Job again
// (before-hook-creation, by default, recreates it), and a cleanup Job deleted once
// it succeeded. Delete: a ConfigMap before, another after. values.fail adds a Job
// that fails (no node matches it, and its deadline is a second), deleted since it
// failed, and a ConfigMap hook after it that never runs; values.failDelete a
// pre-delete Job that fails.
const hookedHooks = `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-setup
  annotations:
    helm.sh/hook: pre-install
    helm.sh/hook-weight: "-5"
stringData:
  password: made-by-the-hook
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: busybox
          env: [{name: GREETING, value: {{ .Values.greeting | quote }}}]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-cleanup
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-weight: "1"
    helm.sh/hook-delete-policy: hook-succeeded
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: cleanup, image: busybox}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-done
  annotations:
    helm.sh/hook: post-install,post-upgrade
data:
  greeting: {{ .Values.greeting | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-bye
  annotations:
    helm.sh/hook: pre-delete
data: {at: pre-delete}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-gone
  annotations:
    helm.sh/hook: post-delete
data: {at: post-delete}
{{- if .Values.fail }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-doomed
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "5"
    helm.sh/hook-delete-policy: hook-failed
{{ include "hooked.doomedSpec" . }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-after-doomed
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "10"
data: {never: "runs"}
{{- end }}
{{- if .Values.failDelete }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-doomed-delete
  annotations:
    helm.sh/hook: pre-delete
{{ include "hooked.doomedSpec" . }}
{{- end }}
`

// hookedHelpers is the spec of a Job that fails: no node matches its pod, and its
// deadline is a second.
const hookedHelpers = `{{- define "hooked.doomedSpec" -}}
spec:
  activeDeadlineSeconds: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {cairn.dev/no-such-node: "true"}
      containers: [{name: doomed, image: busybox}]
{{- end }}
`

// hookedChart packages the chart of hookedApp, hookedHooks and hookedHelpers.
func hookedChart(t *testing.T) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "hooked", Version: "0.1.0"},
		Values: map[string]any{"greeting": "hello", "extra": false, "fail": false, "failDelete": false, "claim": false}}
	ch.Templates = []*chart.File{
		{Name: "templates/app.yaml", Data: []byte(hookedApp)},
		{Name: "templates/hooks.yaml", Data: []byte(hookedHooks)},
		{Name: "templates/_helpers.tpl", Data: []byte(hookedHelpers)},
	}
	return packaged(t, ch)
}

// hookedRepo pushes the chart and returns a repository with instance web of it,
// and the YAML of an instance of it with values.
func (e *env) hookedRepo(t *testing.T) (*gitRepo, func(name, values string) string) {
	reg := startRegistry(t, false, false)
	pushChart(t, e.ctx, registryClient(t, reg, false), "charts/hooked", hookedChart(t), nil)
	// kwok may take up to a minute to complete a Job's pod (it sees pods when it
	// lists them again), so the hooks get more than the usual minute.
	inst := func(name, values string) string {
		yaml := chartInstanceYAML(name, e.ns, "oci://"+reg.Host+"/charts/hooked", "0.1.0", "  values:\n"+values)
		return strings.Replace(yaml, "timeout: 1m", "timeout: 4m", 1)
	}
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":      platformWithVerify("", ""),
		"registries.yaml":    registryYAML("charts", reg.Host, true, ""),
		"instances/web.yaml": inst("web", "    greeting: hello\n"),
	})
	return repo, inst
}

// created is an object's creation time.
func created(u *unstructured.Unstructured) time.Time { return u.GetCreationTimestamp().Time }

// jobCompleted is the time a Job completed; zero when it has not.
func jobCompleted(u *unstructured.Unstructured) time.Time {
	s, _, _ := unstructured.NestedString(u.Object, "status", "completionTime")
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

// withCommit commits files to repo and returns it.
func withCommit(repo *gitRepo, msg string, files map[string]string) *gitRepo {
	repo.commit(msg, files)
	return repo
}
