package reconciler

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/opencontainers/go-digest"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/reconciler/valuesfrom"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
	"cairn.dev/cairn/sign"
)

// Render Jobs (Platform.spec.render.mode: Job, docs/render-jobs.md): the render of
// an instance runs in a Kubernetes Job of cairn's namespace, which holds no API
// token, no signing key and only the publish Registry's credentials; the instance's
// reconcile waits for it, in its render slot as an in-process render would, and goes
// on with what it fetched, as after an in-process render. Nothing the Job reports is
// taken on trust: its result is fetched by digest, must name the task's input, open
// with the task's key and have the digest of its objects (rendertask.Fetch), and
// what it says in its termination message is masked before anyone sees it.

// jobPoll is how often a reconcile looks at its render Job.
const jobPoll = 250 * time.Millisecond

// renderInJob renders req, the request of mi, in a render Job and returns the
// render the Job pushed, fetched by digest and opened with the task's key. chart
// is mi's verified chart or Timoni module pulled from a registry (nil: none): the
// controller pulls it by digest, as it verified it, and the source artifact carries
// it, so the pod needs no credential of the registry it came from.
func (s *RevisionState) renderInJob(ctx context.Context, mi *cairnv1.ModuleInstance, req render.Request, chart *chartInput,
	artifacts []cairnv1.ArtifactStatus, masks []string) (*render.Result, error) {
	pub := s.platform.Spec.Render.Publish
	if pub == nil {
		return nil, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, errors.New("render mode Job needs spec.render.publish: the Job pushes its render there"))
	}
	access, f := s.supplyChain(ctx).Registry(pub.Registry)
	if f != nil {
		return nil, f
	}
	oci, reg := access.Client, access.Registry
	if c := access.Credentials; c != nil {
		masks = append(slices.Clone(masks), c.Password) // a pod that escaped its render could report them
	}
	tarball, q, err := s.jobSource(ctx, mi, req, chart)
	if err != nil {
		return nil, err
	}
	mounts := rendertask.Mounts{PublishCA: reg.Spec.CAConfigMap}
	if reg.Spec.SecretRef != nil {
		mounts.PublishSecret = reg.Spec.SecretRef.Name
	}
	var modules *rendertask.ModuleRegistry
	if r := req.Registry; r != nil && chart == nil && r.Verifier != nil && (req.CUEModule != nil || len(req.Catalogs) > 0) {
		// In-process, every module a CUE render pulls (its imports too) is
		// resolved to a digest and verified as it is fetched; a Job's pod holds no
		// key to verify with and would pull by version.
		return nil, outcome.NewStalled(declarations.ReasonNotAvailable, errors.New(
			"a render Job does not verify the CUE modules and catalogs it pulls: with signature verification on for the module registry, render this instance InProcess"))
	}
	if r := req.Registry; r != nil && chart == nil {
		// A CUE module of the registry, or catalogs: the pod pulls them itself, with
		// the module registry's credentials (and only those besides the publish
		// Registry's).
		macc, f := s.supplyChain(ctx).Registry(s.platform.Spec.ModuleRegistry)
		if f != nil {
			return nil, f
		}
		modules = &rendertask.ModuleRegistry{Endpoint: rendertask.Endpoint{Host: r.Host, PlainHTTP: r.PlainHTTP}, Prefix: r.Prefix}
		mounts.ModulesCA = macc.Registry.Spec.CAConfigMap
		if macc.Registry.Spec.SecretRef != nil {
			mounts.ModulesSecret = macc.Registry.Spec.SecretRef.Name
		}
		if c := macc.Credentials; c != nil {
			masks = append(slices.Clone(masks), c.Password)
		}
	}
	base := strings.Trim(pub.Repository, "/") + "/" + mi.Namespace + "/" + mi.Name
	sourceDigest, err := rendertask.PushSource(ctx, oci, base+"/source", tarball)
	if err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonPublishFailed, fmt.Errorf("failed to push the render Job's source: %w", err))
	}
	spec := &rendertask.Spec{Namespace: mi.Namespace, Name: mi.Name, Revision: s.rev.SHA,
		Registry: rendertask.Endpoint{Host: reg.Spec.Hostname, PlainHTTP: reg.Spec.PlainHTTP},
		Source:   base + "/source", SourceDigest: sourceDigest.String(), Result: base + "/render", ModuleRegistry: modules, Request: q}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	// The request (values from Secrets among it) and the source, keyed: the digest is
	// public (the task's name, the result's tag), its input is not.
	mac := hmac.New(sha256.New, s.digestKey)
	mac.Write(in)
	for _, a := range artifacts { // the modules and catalogs as resolved now: a moved tag is another input
		fmt.Fprintf(mac, "\x00%s@%s", a.Ref, a.Digest)
	}
	spec.InputDigest = "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
	s.e.sweepConfigs(ctx, s.e.cluster.client, s.e.namespace())
	job := &renderJob{s: s, c: s.e.cluster.client, ns: s.e.namespace(), spec: spec, mounts: mounts, oci: oci, masks: masks,
		limits: req.Limits, name: rendertask.Name(mi.Namespace, mi.Name, spec.InputDigest)}
	res, err := job.run(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case chart != nil:
		res.ModuleDigest = chart.Digest // the controller's to say: it verified it
	case req.CUEModule != nil && len(artifacts) > 0:
		res.ModuleDigest = artifacts[0].Digest // the module as the controller resolved it
	}
	return res, nil
}

// jobSource is the source a render Job of mi renders and the request it carries:
// the module's files of the repository (the module directory and what its links
// reach, or the kustomize tree), or, for a chart or a Timoni module of a registry,
// the verified archive or files alone.
func (s *RevisionState) jobSource(ctx context.Context, mi *cairnv1.ModuleInstance, req render.Request, chart *chartInput) ([]byte, rendertask.Request, error) {
	var (
		tarball []byte
		c       *rendertask.Chart
		err     error
	)
	switch {
	case chart != nil && chart.timoni != nil:
		t := *req.Timoni
		t.Ref, t.Digest, t.Path = chart.Display(), chart.Digest, ""
		req.Timoni = &t
		mod, perr := chart.PullTimoniModule(ctx)
		if perr != nil {
			return nil, rendertask.Request{}, perr
		}
		files := map[string][]byte{}
		for name, data := range mod {
			files[path.Join(rendertask.ModuleDir, name)] = data
		}
		tarball, err = rendertask.PackFiles(files)
	case chart != nil:
		archive, perr := chart.PullChart(ctx)
		if perr != nil {
			return nil, rendertask.Request{}, perr
		}
		c = &rendertask.Chart{Ref: chart.Display(), Digest: chart.Digest}
		tarball, err = rendertask.PackFiles(map[string][]byte{rendertask.ChartFile: archive})
	default:
		_, dirs := s.repositorySource(mi)
		tarball, err = rendertask.PackSource(req.Source, dirs)
	}
	if err != nil {
		return nil, rendertask.Request{}, outcome.NewTransient(cairnv1.ReasonRenderFailed, err)
	}
	return tarball, rendertask.RequestOf(req, c), nil
}

// renderJob is the work of one render task.
type renderJob struct {
	s      *RevisionState
	c      client.Client
	ns     string
	name   string
	spec   *rendertask.Spec
	mounts rendertask.Mounts
	limits render.Limits
	oci    *sign.Client
	masks  []string // what never shows in a message of the task
}

// run gets the task (made, or found from an earlier attempt: a restarted controller
// finds the same task by name), waits for its Job and fetches what it pushed. A
// task that succeeded before is fetched again without a Job; one whose render
// failed fails the same way (the same input renders the same); one that failed for
// another reason (the registry, the Job's deadline, its pod killed) is removed, so
// that the next attempt runs a new Job.
func (j *renderJob) run(ctx context.Context) (*render.Result, error) {
	task, key, err := j.ensureTask(ctx)
	if err != nil {
		return nil, err
	}
	if d := task.Status.ArtifactDigest; d != "" {
		return j.fetch(ctx, task, key, digest.Digest(d))
	}
	if msg, failed := renderFailed(task); failed {
		return nil, fmt.Errorf("render Job %s/%s failed: %s", j.ns, rendertask.JobName(j.name), msg)
	}
	limits := j.limits
	if limits.Timeout <= 0 {
		limits.Timeout = render.DefaultLimits().Timeout
	}
	if limits.Memory <= 0 {
		limits.Memory = render.DefaultLimits().Memory
	}
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout+rendertask.JobStartup+30*time.Second) // the Job's own deadline ends it first
	defer cancel()
	msg, succeeded, err := j.await(ctx, task, limits)
	if err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("render Job %s/%s: %w", j.ns, rendertask.JobName(j.name), err))
	}
	msg = valuesfrom.Mask(msg, j.masks)
	if !succeeded {
		j.finish(ctx, task, false, "", msg)
		if rest, ok := strings.CutPrefix(msg, "error: "); ok { // the render's own failure
			return nil, fmt.Errorf("render Job %s/%s failed: %s", j.ns, rendertask.JobName(j.name), rest)
		}
		// Not the render's: the registry, the deadline, a killed pod. Retried with a
		// new task and Job (the Job goes first: the next task takes its name).
		bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
		_ = j.c.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: j.ns, Name: rendertask.JobName(j.name)}}, bg)
		_ = j.c.Delete(ctx, task, bg)
		return nil, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("render Job %s/%s: %s", j.ns, rendertask.JobName(j.name),
			strings.TrimPrefix(msg, "unavailable: ")))
	}
	dgst, err := digest.Parse(strings.TrimPrefix(msg, "digest: "))
	if err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("render Job %s/%s ended without a digest: %q", j.ns, rendertask.JobName(j.name), truncate(msg, 256)))
	}
	res, err := j.fetch(ctx, task, key, dgst)
	if err == nil {
		j.finish(ctx, task, true, dgst.String(), "")
	}
	return res, err
}

// renderFailed tells whether task failed with its render's own error, and which.
func renderFailed(task *cairnv1.RenderTask) (string, bool) {
	rest, ok := strings.CutPrefix(task.Status.Message, "error: ")
	return rest, ok && conditions.IsTrue(task, cairnv1.JobFailedCondition)
}

// fetch pulls the render dgst the task pushed and checks it (rendertask.Fetch).
func (j *renderJob) fetch(ctx context.Context, task *cairnv1.RenderTask, key rendertask.Key, dgst digest.Digest) (*render.Result, error) {
	res, err := rendertask.Fetch(ctx, j.oci, j.spec, dgst, key)
	if err != nil {
		return nil, outcome.NewStalled(cairnv1.ReasonRenderFailed, fmt.Errorf("render Job %s/%s: %s", j.ns, rendertask.JobName(j.name),
			valuesfrom.Mask(err.Error(), j.masks)))
	}
	return res, nil
}

func (j *renderJob) secretName() string { return "render-" + j.name }
func (j *renderJob) keyName() string    { return "render-" + j.name + "-key" }

// ensureTask creates the RenderTask, its key Secret and its config Secret, or
// finds them, and returns the task and its key.
func (j *renderJob) ensureTask(ctx context.Context) (*cairnv1.RenderTask, rendertask.Key, error) {
	task := &cairnv1.RenderTask{ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: j.ns,
		Labels: map[string]string{cairnv1.InstanceLabel: cairnv1.InstanceKey(j.spec.Namespace, j.spec.Name)}},
		Spec: cairnv1.RenderTaskSpec{Instance: cairnv1.InstanceReference{Namespace: j.spec.Namespace, Name: j.spec.Name},
			InputDigest: j.spec.InputDigest, Revision: j.spec.Revision,
			SourceArtifact: j.spec.Registry.Host + "/" + j.spec.Source + "@" + j.spec.SourceDigest}}
	err := j.c.Create(ctx, task)
	if apierrors.IsAlreadyExists(err) {
		err = j.c.Get(ctx, client.ObjectKeyFromObject(task), task)
	}
	if err != nil {
		return nil, rendertask.Key{}, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("failed to create RenderTask %s/%s: %w", j.ns, j.name, err))
	}
	key, err := j.ensureKey(ctx, task)
	if err != nil {
		return nil, rendertask.Key{}, err
	}
	j.spec.PublicKey = rendertask.EncodeKey(key.Public)
	data, err := json.Marshal(j.spec)
	if err != nil {
		return nil, rendertask.Key{}, err
	}
	if task.Status.ArtifactDigest != "" || conditions.IsTrue(task, cairnv1.JobFailedCondition) {
		return task, key, nil // ended: no Job runs it again
	}
	config := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: j.secretName(), Namespace: j.ns,
		Labels:          map[string]string{rendertask.ConfigLabel: task.Name},
		OwnerReferences: []metav1.OwnerReference{rendertask.Owned(task)}}, Data: map[string][]byte{"spec.json": data}}
	err = j.c.Create(ctx, config)
	if apierrors.IsAlreadyExists(err) { // an earlier attempt's: the Spec with this key
		err = j.c.Update(ctx, config)
	}
	if err != nil {
		return nil, rendertask.Key{}, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("failed to write Secret %s/%s: %w", j.ns, config.Name, err))
	}
	return task, key, nil
}

// ensureKey makes the task's key pair, kept in a Secret the task owns (the pod
// mounts only the public half, in its Spec), or reads it back.
func (j *renderJob) ensureKey(ctx context.Context, task *cairnv1.RenderTask) (rendertask.Key, error) {
	var sec corev1.Secret
	err := j.c.Get(ctx, client.ObjectKey{Namespace: j.ns, Name: j.keyName()}, &sec)
	if err == nil {
		pub, perr := rendertask.DecodeKey(string(sec.Data["public"]))
		priv, kerr := rendertask.DecodeKey(string(sec.Data["private"]))
		if perr == nil && kerr == nil {
			return rendertask.Key{Public: pub, Private: priv}, nil
		}
		err = errors.New("it does not hold a key pair")
	}
	if !apierrors.IsNotFound(err) {
		return rendertask.Key{}, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("render task %s/%s: key Secret: %w", j.ns, j.name, err))
	}
	key, err := rendertask.NewKey()
	if err != nil {
		return rendertask.Key{}, err
	}
	sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: j.keyName(), Namespace: j.ns,
		OwnerReferences: []metav1.OwnerReference{rendertask.Owned(task)}},
		Data: map[string][]byte{"public": []byte(rendertask.EncodeKey(key.Public)), "private": []byte(rendertask.EncodeKey(key.Private))}}
	if err := j.c.Create(ctx, &sec); err != nil {
		return rendertask.Key{}, outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("render task %s/%s: key Secret: %w", j.ns, j.name, err))
	}
	return key, nil
}

// await runs the task's Job until it ends and returns its pod's termination
// message and whether it succeeded. A Job that is missing before the task ended
// (never made, or deleted while it ran) is made again.
func (j *renderJob) await(ctx context.Context, task *cairnv1.RenderTask, limits render.Limits) (string, bool, error) {
	want := rendertask.Job(task, j.secretName(), j.mounts, j.s.e.opts.RenderJob, limits.Timeout, limits.Memory)
	scheduled := false
	for {
		var job batchv1.Job
		err := j.c.Get(ctx, client.ObjectKeyFromObject(want), &job)
		switch {
		case apierrors.IsNotFound(err):
			// Another reconcile of the same input may have ended the task meanwhile.
			var now cairnv1.RenderTask
			if err := j.c.Get(ctx, client.ObjectKeyFromObject(task), &now); err == nil && now.Status.ArtifactDigest != "" {
				return "digest: " + now.Status.ArtifactDigest, true, nil
			}
			if err := j.c.Create(ctx, want.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				return "", false, fmt.Errorf("failed to create the Job: %w", err)
			}
			if !scheduled {
				j.mark(ctx, task, func(t *cairnv1.RenderTask) {
					t.Status.JobName = want.Name
					conditions.MarkTrue(t, cairnv1.JobScheduledCondition, "JobCreated", "Job %s renders %s", want.Name, j.spec.InputDigest)
				})
				scheduled = true
			}
		case err != nil:
			return "", false, err
		case !ownedBy(&job, task):
			// An earlier task's of the same name, being collected: not this one's.
			_ = j.c.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		default:
			for _, c := range job.Status.Conditions {
				if c.Status != corev1.ConditionTrue || (c.Type != batchv1.JobComplete && c.Type != batchv1.JobFailed) {
					continue
				}
				msg := j.terminationMessage(ctx, j.name)
				if msg == "" && c.Type == batchv1.JobFailed {
					msg = "error: " + c.Reason + ": " + c.Message
				}
				return msg, c.Type == batchv1.JobComplete, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", false, context.Cause(ctx)
		case <-time.After(jobPoll):
		}
	}
}

// ownedBy tells whether task owns job.
func ownedBy(job *batchv1.Job, task *cairnv1.RenderTask) bool {
	for _, o := range job.OwnerReferences {
		if o.UID == task.UID {
			return true
		}
	}
	return false
}

// terminationMessage is the termination message of the last pod of the task
// name's Job that ended ("" when none did).
func (j *renderJob) terminationMessage(ctx context.Context, name string) string {
	var pods corev1.PodList
	if err := j.c.List(ctx, &pods, client.InNamespace(j.ns), client.MatchingLabels{rendertask.PodLabel: name}); err != nil {
		return ""
	}
	msg, last := "", time.Time{}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if t := st.State.Terminated; t != nil && !t.FinishedAt.Time.Before(last) {
				msg, last = t.Message, t.FinishedAt.Time
			}
		}
	}
	return msg
}

// finish records the task's end on its status and removes what it no longer
// needs: on success its config Secret (it holds the values, perhaps from Secrets)
// and its Job. A failed task's Job stays for its logs until its TTL
// (FailedJobTTL, the Job's ttlSecondsAfterFinished), and so does its config
// Secret, marked with the time it is deleted (see sweepConfigs). The key stays
// with the task, so a later attempt at the same input fetches its render again.
func (j *renderJob) finish(ctx context.Context, task *cairnv1.RenderTask, ok bool, dgst, msg string) {
	j.mark(ctx, task, func(t *cairnv1.RenderTask) {
		conditions.MarkFalse(t, cairnv1.JobScheduledCondition, "JobFinished", "the Job ended")
		if ok {
			t.Status.ArtifactDigest = dgst
			conditions.MarkTrue(t, cairnv1.JobSucceededCondition, cairnv1.ReasonSucceeded, "pushed %s", dgst)
			return
		}
		conditions.MarkTrue(t, cairnv1.JobFailedCondition, cairnv1.ReasonRenderFailed, "%s", truncate(msg, 1024))
		t.Status.Message = truncate(msg, 4096)
	})
	config := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: j.ns, Name: j.secretName()}}
	if ok {
		_ = j.c.Delete(ctx, config)
		_ = j.c.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: j.ns, Name: rendertask.JobName(j.name)}},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
	} else {
		expires := time.Now().Add(j.s.e.opts.RenderJob.FailedTTL()).UTC().Format(time.RFC3339)
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, rendertask.ExpiresAnnotation, expires)
		if err := j.c.Patch(ctx, config, client.RawPatch(types.MergePatchType, patch)); err != nil {
			_ = j.c.Delete(ctx, config) // not kept unmarked: nothing would ever delete it
		}
	}
	j.collect(ctx, task)
}

// sweepConfigs deletes the config Secrets of failed tasks in ns whose time has
// come (ExpiresAnnotation), at most once a minute (or once a FailedJobTTL, when
// shorter): each revision's sync and each render Job sweeps.
func (e *Engine) sweepConfigs(ctx context.Context, c client.Client, ns string) {
	now := time.Now()
	interval := min(time.Minute, e.opts.RenderJob.FailedTTL())
	last := e.lastSweep.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < interval || !e.lastSweep.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{rendertask.ConfigLabel}); err != nil {
		return
	}
	for i := range secrets.Items {
		if expiredConfig(&secrets.Items[i], now) {
			_ = c.Delete(ctx, &secrets.Items[i])
		}
	}
}

// expiredConfig tells whether the config Secret sec of a failed task is due at now.
func expiredConfig(sec *corev1.Secret, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, sec.Annotations[rendertask.ExpiresAnnotation])
	return err == nil && !now.Before(at)
}

// keptTasks is how many RenderTasks of an instance are kept, the newest.
const keptTasks = 3

// collect deletes the instance's older RenderTasks beyond the newest keptTasks
// (each takes its Job and Secrets with it: they are its own), then the sources and
// results in the publish Registry that no kept task names (collectArtifacts).
func (j *renderJob) collect(ctx context.Context, task *cairnv1.RenderTask) {
	var tasks cairnv1.RenderTaskList
	if err := j.c.List(ctx, &tasks, client.InNamespace(j.ns), client.MatchingLabels{cairnv1.InstanceLabel: task.Labels[cairnv1.InstanceLabel]}); err != nil {
		return
	}
	items := tasks.Items
	slices.SortFunc(items, func(a, b cairnv1.RenderTask) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	kept := []cairnv1.RenderTask{*task} // as this reconcile knows it: the list may lag its status
	for i := range items {
		if items[i].Name == task.Name {
			continue
		}
		if len(kept) < keptTasks {
			kept = append(kept, items[i])
			continue
		}
		_ = j.c.Delete(ctx, &items[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	j.collectArtifacts(ctx, kept)
}

// collectArtifacts deletes from the publish Registry the source and result
// artifacts of the instance's render tasks that are gone: what a kept task names
// (its source by digest, its result by its input's tag or by digest) stays, and
// so does any tag of another shape. Best effort and bounded: a Registry that
// refuses deletes is not asked again by this process (as published renders),
// and it is bounded by collectTimeout as they are.
func (j *renderJob) collectArtifacts(ctx context.Context, kept []cairnv1.RenderTask) {
	registry := j.s.platform.Spec.Render.Publish.Registry
	if _, refused := j.s.e.refusedDeletes.Load(registry); refused {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, collectTimeout)
	defer cancel()
	keepTags, keepDigests := map[string]bool{}, map[string]bool{}
	for _, t := range kept {
		keepTags[rendertask.Tag(t.Spec.InputDigest)] = true
		if _, d, ok := strings.Cut(t.Spec.SourceArtifact, "@"); ok {
			keepDigests[d] = true
		}
		if d := t.Status.ArtifactDigest; d != "" {
			keepDigests[d] = true
		}
	}
	for _, repo := range []string{j.spec.Source, j.spec.Result} {
		tags, err := j.oci.Tags(ctx, repo)
		if err != nil {
			return
		}
		for _, tag := range tags {
			if keepTags[tag] || !rendertask.IsTag(tag) {
				continue
			}
			desc, err := j.oci.Resolve(ctx, repo, tag)
			if err != nil || keepDigests[desc.Digest.String()] {
				continue
			}
			err = j.oci.Delete(ctx, repo, desc.Digest)
			if sign.Reason(err) == sign.ReasonUnsupported {
				if _, had := j.s.e.refusedDeletes.LoadOrStore(registry, true); !had {
					j.s.e.logger(ctx).Info("the publish Registry refuses deletes: render Jobs' artifacts are not collected", "registry", registry)
				}
				return
			}
		}
	}
}

// mark patches task's status as edit leaves it (best effort: the status reports,
// nothing reads it back).
func (j *renderJob) mark(ctx context.Context, task *cairnv1.RenderTask, edit func(*cairnv1.RenderTask)) {
	before := task.DeepCopy()
	edit(task)
	_ = j.c.Status().Patch(ctx, task, client.MergeFrom(before))
}
