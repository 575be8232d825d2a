// Package plans keeps the plans of pull requests in the cluster, one Secret of
// cairn's namespace per pull request, so that every replica's dashboard (and
// `cairn dashboard`) shows the plans waiting, whichever replica planned them, and
// once a pull request is merged, whether its change was applied as planned.
//
// A Secret, not a ConfigMap: a plan holds rendered diffs of every instance the
// change touches (never a Secret's value: plans are masked), and the cluster's
// roles keep Secrets of cairn's namespace from tenants, who see a plan only
// through the dashboard, instance by instance.
package plans

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
)

const (
	// Label marks the Secrets of plans; NumberLabel gives the pull request.
	Label       = "cairn.dev/plan"
	NumberLabel = "cairn.dev/pull-request"
	// SecretType is the type of a plan's Secret.
	SecretType corev1.SecretType = "cairn.dev/plan"
	dataKey                      = "plan.json.gz"
	// maxBytes keeps a plan's Secret well under the API server's 1 MiB: a larger
	// plan is kept without its diffs.
	maxBytes = 768 << 10
)

// Record is a pull request's plan and what became of the pull request.
type Record struct {
	Number  int    `json:"number"`
	HeadSHA string `json:"headSHA"`
	BaseSHA string `json:"baseSHA,omitempty"`
	HeadRef string `json:"headRef,omitempty"`
	BaseRef string `json:"baseRef,omitempty"`
	Fork    bool   `json:"fork,omitempty"`
	// State is open, merged or closed (forge.PROpen...); MergeSHA the merge's
	// commit, MergedAt when cairn learnt of the merge.
	State     string     `json:"state"`
	MergeSHA  string     `json:"mergeSHA,omitempty"`
	MergedAt  *time.Time `json:"mergedAt,omitempty"`
	PlannedAt time.Time  `json:"plannedAt"`
	// DiffsLeftOut: the plan was too large to keep whole, its diffs are not kept.
	DiffsLeftOut bool             `json:"diffsLeftOut,omitempty"`
	Plan         *reconciler.Plan `json:"plan"`
}

// Summary is what the list of plans needs of a Record, kept in an annotation of
// its Secret so that the list reads the Secrets' metadata only: the pull request,
// and per instance its action, planned render digest and object counts.
type Summary struct {
	Number       int               `json:"number"`
	HeadSHA      string            `json:"headSHA"`
	HeadRef      string            `json:"headRef,omitempty"`
	Fork         bool              `json:"fork,omitempty"`
	State        string            `json:"state"`
	MergeSHA     string            `json:"mergeSHA,omitempty"`
	MergedAt     *time.Time        `json:"mergedAt,omitempty"`
	PlannedAt    time.Time         `json:"plannedAt"`
	Error        bool              `json:"error,omitempty"`
	DiffsLeftOut bool              `json:"diffsLeftOut,omitempty"`
	Instances    []SummaryInstance `json:"instances,omitempty"`
	// Truncated: the plan has more instances than a summary keeps (maxSummarized).
	Truncated bool `json:"truncated,omitempty"`
}

// SummaryInstance is one instance of a Summary.
type SummaryInstance struct {
	Namespace    string `json:"ns"`
	Name         string `json:"name"`
	Action       string `json:"action"`
	RenderDigest string `json:"digest,omitempty"`
	Create       int    `json:"c,omitempty"`
	Configure    int    `json:"u,omitempty"`
	Prune        int    `json:"p,omitempty"`
}

// maxSummarized bounds a summary's instances (an annotation holds 256 KiB in all).
const maxSummarized = 1000

// Bounds of the plans kept: the newest KeepDone of the merged or closed pull
// requests, and MaxPlans in all (the oldest merged or closed go first, then the
// oldest open): a flood of pull requests (from forks) costs that much etcd and no
// more.
const (
	KeepDone = 20
	MaxPlans = 200
)

const summaryAnnotation = "cairn.dev/plan-summary"

// SummaryOf is the summary of r (the first maxSummarized instances).
func SummaryOf(r *Record) Summary {
	sum := Summary{Number: r.Number, HeadSHA: r.HeadSHA, HeadRef: r.HeadRef, Fork: r.Fork, State: r.State, MergeSHA: r.MergeSHA,
		MergedAt: r.MergedAt, PlannedAt: r.PlannedAt, Error: r.Plan.Error != "", DiffsLeftOut: r.DiffsLeftOut}
	for i, ip := range r.Plan.Instances {
		if i == maxSummarized {
			sum.Truncated = true
			break
		}
		sum.Instances = append(sum.Instances, SummaryInstance{Namespace: ip.Namespace, Name: ip.Name, Action: string(ip.Action),
			RenderDigest: ip.RenderDigest, Create: len(ip.Create), Configure: len(ip.Configure), Prune: len(ip.Prune)})
	}
	return sum
}

// Store keeps Records in Secrets of Namespace.
type Store struct {
	Client    client.Client
	Namespace string
}

func name(number int) string { return "cairn-plan-" + strconv.Itoa(number) }

// Save keeps r, replacing the pull request's earlier plan.
func (s Store) Save(ctx context.Context, r *Record) error {
	data, err := encode(r)
	if err != nil {
		return err
	}
	if len(data) > maxBytes {
		lean := *r
		p := *r.Plan
		p.Instances = append([]reconciler.InstancePlan(nil), r.Plan.Instances...)
		for i := range p.Instances {
			p.Instances[i].Diff = ""
		}
		lean.Plan, lean.DiffsLeftOut = &p, true
		if data, err = encode(&lean); err != nil {
			return err
		}
	}
	summary, err := json.Marshal(SummaryOf(r))
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name(r.Number), Namespace: s.Namespace,
		Labels:      map[string]string{Label: "true", NumberLabel: strconv.Itoa(r.Number)},
		Annotations: map[string]string{summaryAnnotation: string(summary)}}, Type: SecretType,
		Data: map[string][]byte{dataKey: data}}
	err = s.Client.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		old := &corev1.Secret{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(sec), old); err != nil {
			return fmt.Errorf("failed to read the plan of pull request #%d: %w", r.Number, err)
		}
		before := old.DeepCopy()
		old.Data, old.Labels, old.Annotations = sec.Data, sec.Labels, sec.Annotations
		err = s.Client.Patch(ctx, old, client.MergeFrom(before)) // cairn's Role patches Secrets, never updates them
	}
	if err != nil {
		return fmt.Errorf("failed to keep the plan of pull request #%d: %w", r.Number, err)
	}
	return s.prune(ctx)
}

// Summaries lists the summaries of every plan kept, newest pull request first,
// reading the Secrets' metadata only.
func (s Store) Summaries(ctx context.Context) ([]Summary, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return nil, fmt.Errorf("failed to list the plans: %w", err)
	}
	out := make([]Summary, 0, len(list.Items))
	for _, m := range list.Items {
		var sum Summary
		if err := json.Unmarshal([]byte(m.Annotations[summaryAnnotation]), &sum); err != nil || sum.Number <= 0 {
			continue // one unreadable summary hides no other
		}
		out = append(out, sum)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out, nil
}

// prune deletes the plans beyond the bounds (KeepDone, MaxPlans).
func (s Store) prune(ctx context.Context) error {
	all, err := s.Summaries(ctx)
	if err != nil {
		return err
	}
	var open, done []int
	for _, sum := range all { // newest first
		if sum.State == "" || sum.State == "open" {
			open = append(open, sum.Number)
		} else {
			done = append(done, sum.Number)
		}
	}
	var drop []int
	if len(done) > KeepDone {
		drop, done = append(drop, done[KeepDone:]...), done[:KeepDone]
	}
	for over := len(open) + len(done) - MaxPlans; over > 0; over-- {
		if len(done) > 0 {
			drop, done = append(drop, done[len(done)-1]), done[:len(done)-1]
		} else {
			drop, open = append(drop, open[len(open)-1]), open[:len(open)-1]
		}
	}
	for _, n := range drop {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name(n), Namespace: s.Namespace}}
		if err := s.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete the plan of pull request #%d: %w", n, err)
		}
	}
	return nil
}

// SetState records what became of pull request number (merged, closed); a pull
// request with no plan kept is left alone.
func (s Store) SetState(ctx context.Context, number int, state, mergeSHA string) error {
	r, err := s.Get(ctx, number)
	if err != nil || r == nil {
		return err
	}
	if r.State == state && r.MergeSHA == mergeSHA {
		return nil
	}
	r.State, r.MergeSHA = state, mergeSHA
	if mergeSHA != "" {
		now := time.Now().UTC()
		r.MergedAt = &now
	}
	return s.Save(ctx, r)
}

// Get returns the plan of pull request number, nil when none is kept.
func (s Store) Get(ctx context.Context, number int) (*Record, error) {
	sec := &corev1.Secret{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name(number)}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decode(sec)
}

func encode(r *Record) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDecoded bounds what one plan may expand to.
const maxDecoded = 64 << 20

func decode(sec *corev1.Secret) (*Record, error) {
	zr, err := gzip.NewReader(bytes.NewReader(sec.Data[dataKey]))
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", sec.Name, err)
	}
	var r Record
	if err := json.NewDecoder(io.LimitReader(zr, maxDecoded)).Decode(&r); err != nil {
		return nil, fmt.Errorf("plan %s: %w", sec.Name, err)
	}
	if r.Plan == nil {
		return nil, fmt.Errorf("plan %s holds no plan", sec.Name)
	}
	return &r, nil
}
