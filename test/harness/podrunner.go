package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// RunPodLabel marks the pods a PodRunner runs: kwok leaves them alone (see
// kwokStages) and nothing else plays their kubelet.
const RunPodLabel = "cairn.dev/render-task"

// PodRootEnv is set, for each pod a PodRunner runs, to the directory that stands
// for the container's root filesystem: its Secret, ConfigMap and emptyDir volumes
// are under it at their mount paths, and its termination message is read from it.
const PodRootEnv = "CAIRN_TASK_ROOT"

// PodRunner is a stand-in kubelet for the pods labelled RunPodLabel: kwok runs no
// containers, so it runs each pod's one container as a local process (the
// container's command mapped to a local binary, its arguments as they are, its
// environment with PodRootEnv added) once the scheduler has bound the pod, and
// reports on the pod what a kubelet would: Running, then Succeeded or Failed with
// the exit code and the termination message, so that the Job controller
// completes or fails the pod's Job itself. A pod deleted while it runs has its
// process killed. Stop ends it.
type PodRunner struct {
	client   kubernetes.Interface
	commands map[string]string
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	running map[string]context.CancelFunc // by namespace/name
	delay   time.Duration
	started int
}

// Started is how many pods it has started.
func (r *PodRunner) Started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// SetDelay makes each pod started from now on run for d before its command starts
// (a slow container: for tests that act while a pod runs).
func (r *PodRunner) SetDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

// RunPods starts a PodRunner over the pods of namespace ("" for all) labelled
// RunPodLabel; commands maps a container's command (its first element) to the
// local binary that runs it.
func (c *Cluster) RunPods(ctx context.Context, namespace string, commands map[string]string) (*PodRunner, error) {
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &PodRunner{client: client, commands: commands, cancel: cancel, running: map[string]context.CancelFunc{}}
	w, err := client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: RunPodLabel})
	if err != nil {
		cancel()
		return nil, err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			r.handle(ctx, w)
			w.Stop()
			// The API server ends watches now and then: watch again (the pods
			// already running are known, see start).
			for ctx.Err() == nil {
				if w, err = client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: RunPodLabel}); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return r, nil
}

// handle acts on the events of w until it ends.
func (r *PodRunner) handle(ctx context.Context, w watch.Interface) {
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		switch {
		case ev.Type == watch.Deleted || pod.DeletionTimestamp != nil:
			r.kill(key)
		case pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodPending:
			r.start(ctx, pod)
		}
	}
}

// Stop kills what runs and waits for it.
func (r *PodRunner) Stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *PodRunner) kill(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel := r.running[key]; cancel != nil {
		cancel()
	}
}

// start runs pod once.
func (r *PodRunner) start(ctx context.Context, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.running[key]; seen {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.running[key] = cancel
	r.started++
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.run(ctx, pod)
	}()
}

// run runs pod's container and reports its end on the pod.
func (r *PodRunner) run(ctx context.Context, pod *corev1.Pod) {
	ctr := pod.Spec.Containers[0]
	root, err := os.MkdirTemp("", "pod-"+pod.Name+"-")
	if err == nil {
		defer os.RemoveAll(root)
		err = r.materialise(ctx, pod, ctr, root)
	}
	msgPath := ctr.TerminationMessagePath
	if msgPath == "" {
		msgPath = corev1.TerminationMessagePathDefault
	}
	if err == nil { // the kubelet mounts an empty file there
		err = os.MkdirAll(filepath.Join(root, filepath.Dir(msgPath)), 0o755)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = r.command(ctx, pod, ctr, root)
	}
	if err != nil {
		r.report(pod, ctr, 128, "ContainerCannotRun", err.Error())
		return
	}
	started := metav1.Now()
	r.setStatus(pod, func(st *corev1.PodStatus) {
		st.Phase, st.StartTime = corev1.PodRunning, &started
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
	})
	r.mu.Lock()
	delay := r.delay
	r.mu.Unlock()
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	out, runErr := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return // the pod is gone, or the runner stopped
	}
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		code = exit.ExitCode()
	case runErr != nil:
		r.report(pod, ctr, 128, "ContainerCannotRun", runErr.Error())
		return
	}
	msg, _ := os.ReadFile(filepath.Join(root, msgPath))
	if len(msg) == 0 && ctr.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError && code != 0 {
		msg = out
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	r.report(pod, ctr, int32(code), reason, string(msg))
}

// command is the container's process: its command mapped to a local binary, its
// arguments, and its environment with PodRootEnv.
func (r *PodRunner) command(ctx context.Context, pod *corev1.Pod, ctr corev1.Container, root string) (*exec.Cmd, error) {
	if len(ctr.Command) == 0 {
		return nil, fmt.Errorf("container %s has no command: the stand-in kubelet runs commands only", ctr.Name)
	}
	bin, ok := r.commands[ctr.Command[0]]
	if !ok {
		return nil, fmt.Errorf("no local binary stands for %s", ctr.Command[0])
	}
	cmd := exec.CommandContext(ctx, bin, append(ctr.Command[1:], ctr.Args...)...)
	cmd.Env = []string{PodRootEnv + "=" + root, "HOME=" + root, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + filepath.Join(root, "tmp")}
	for _, e := range ctr.Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			s, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.SecretKeyRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			v = string(s.Data[ref.SecretKeyRef.Key])
		}
		cmd.Env = append(cmd.Env, e.Name+"="+v)
	}
	return cmd, os.MkdirAll(filepath.Join(root, "tmp"), 0o700)
}

// materialise writes the container's Secret, ConfigMap and emptyDir volumes under
// root at their mount paths (each key a file, or the items named), as the kubelet
// mounts them.
func (r *PodRunner) materialise(ctx context.Context, pod *corev1.Pod, ctr corev1.Container, root string) error {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return fmt.Errorf("volume %s is not declared", m.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			s, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			data, items = s.Data, v.Secret.Items
		case v.ConfigMap != nil:
			cm, err := r.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			data, items = map[string][]byte{}, v.ConfigMap.Items
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		case v.EmptyDir != nil:
			continue
		case v.Projected != nil:
			// The ServiceAccount token volume the API server adds: its ConfigMaps and
			// Secrets are written, no token is minted (a render task needs none).
			data = map[string][]byte{}
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					cm, err := r.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					for _, it := range src.ConfigMap.Items {
						data[it.Path] = []byte(cm.Data[it.Key])
						items = append(items, corev1.KeyToPath{Key: it.Path, Path: it.Path})
					}
				case src.Secret != nil:
					sec, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, src.Secret.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					for _, it := range src.Secret.Items {
						data[it.Path] = sec.Data[it.Key]
						items = append(items, corev1.KeyToPath{Key: it.Path, Path: it.Path})
					}
				}
			}
			if len(items) == 0 {
				continue
			}
		default:
			return fmt.Errorf("volume %s: only Secret, ConfigMap, projected and emptyDir volumes stand in", m.Name)
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			if _, ok := data[it.Key]; !ok {
				continue // an optional key the object lacks, as the kubelet leaves it out
			}
			p := filepath.Join(dir, filepath.FromSlash(it.Path))
			if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
				return fmt.Errorf("volume %s: item path %s leaves the mount", m.Name, it.Path)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, data[it.Key], 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// report records the container's end on the pod: Succeeded for exit 0, else
// Failed.
func (r *PodRunner) report(pod *corev1.Pod, ctr corev1.Container, code int32, reason, message string) {
	now := metav1.Now()
	r.setStatus(pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodSucceeded
		if code != 0 {
			st.Phase = corev1.PodFailed
		}
		if st.StartTime == nil {
			st.StartTime = &now
		}
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: "PodCompleted"}}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: ctr.Name, Image: ctr.Image, Started: ptrTo(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason,
				Message: message, StartedAt: *st.StartTime, FinishedAt: now}}}}
	})
}

// setStatus writes the pod's status as edit leaves it, on the pod as it is now,
// retried on conflicts for a while; a pod gone meanwhile is left alone.
func (r *PodRunner) setStatus(pod *corev1.Pod, edit func(*corev1.PodStatus)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		cur, err := r.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil {
			edit(&cur.Status)
			if _, err = r.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil || apierrors.IsNotFound(err) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptrTo[T any](v T) *T { return &v }
