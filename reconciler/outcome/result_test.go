package outcome

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestNextRetryIsTheEarliestFailedInstance(t *testing.T) {
	g := NewWithT(t)
	at := func(d time.Duration) *time.Time { x := time.Unix(1000, 0).Add(d); return &x }
	res := &SyncResult{Instances: []InstanceResult{
		{Action: ActionFailed, NextRetryAt: at(30 * time.Minute)},
		{Action: ActionFailed, NextRetryAt: at(5 * time.Second)},
		{Action: ActionProgressing, NextRetryAt: at(4 * time.Second)},
		{Action: ActionUnchanged},
		{Action: ActionUpdated, NextRetryAt: at(time.Second)}, // not failed: ignored
	}}
	g.Expect(res.NextRetry()).To(Equal(*at(4 * time.Second)), "a progressing instance is rechecked like a failed one is retried")
	g.Expect(res.Failed()).To(BeTrue())
	g.Expect((&SyncResult{Instances: []InstanceResult{{Action: ActionProgressing}}}).Failed()).To(BeFalse(), "progressing is no failure")
	g.Expect((&SyncResult{}).NextRetry().IsZero()).To(BeTrue())
	unusable := &SyncResult{Error: Failuref(Stalled, "X", "x"), RetryAt: *at(0)}
	g.Expect(unusable.NextRetry()).To(Equal(*at(0)))
	g.Expect(unusable.Failed()).To(BeTrue())
	g.Expect((&SyncResult{Error: errors.New("bad")}).Failed()).To(BeTrue(), "an unusable revision is a failure")
}
