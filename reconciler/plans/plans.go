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
	// State is open, merged or closed (forge.PROpen...); MergeSHA the merge's commit.
	State     string    `json:"state"`
	MergeSHA  string    `json:"mergeSHA,omitempty"`
	PlannedAt time.Time `json:"plannedAt"`
	// DiffsLeftOut: the plan was too large to keep whole, its diffs are not kept.
	DiffsLeftOut bool             `json:"diffsLeftOut,omitempty"`
	Plan         *reconciler.Plan `json:"plan"`
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
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name(r.Number), Namespace: s.Namespace,
		Labels: map[string]string{Label: "true", NumberLabel: strconv.Itoa(r.Number)}}, Type: SecretType,
		Data: map[string][]byte{dataKey: data}}
	err = s.Client.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		old := &corev1.Secret{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(sec), old); err != nil {
			return fmt.Errorf("failed to read the plan of pull request #%d: %w", r.Number, err)
		}
		before := old.DeepCopy()
		old.Data, old.Labels = sec.Data, sec.Labels
		err = s.Client.Patch(ctx, old, client.MergeFrom(before)) // cairn's Role patches Secrets, never updates them
	}
	if err != nil {
		return fmt.Errorf("failed to keep the plan of pull request #%d: %w", r.Number, err)
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

// List returns every plan kept, newest pull request first.
func (s Store) List(ctx context.Context) ([]*Record, error) {
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return nil, fmt.Errorf("failed to list the plans: %w", err)
	}
	out := make([]*Record, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Type != SecretType {
			continue
		}
		r, err := decode(&list.Items[i])
		if err != nil {
			continue // one unreadable plan hides no other
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	return out, nil
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
