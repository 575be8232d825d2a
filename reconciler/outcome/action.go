package outcome

// Action is what a sync did to an instance (InstanceResult.Action).
type Action string

// The actions of a sync.
const (
	ActionCreated   Action = "Created"
	ActionUpdated   Action = "Updated"
	ActionUnchanged Action = "Unchanged"
	ActionDeleted   Action = "Deleted"
	ActionSkipped   Action = "Skipped"
	ActionFailed    Action = "Failed"
	// ActionProgressing: applied, not yet Current when the sync stopped waiting
	// (see Options.HealthWait); a later sync gives the verdict.
	ActionProgressing Action = "Progressing"
)

// PlanAction is what a sync would do to an instance (InstancePlan.Action).
type PlanAction string

// The actions of a plan.
const (
	PlanCreate    PlanAction = "Create"
	PlanUpdate    PlanAction = "Update"
	PlanUnchanged PlanAction = "Unchanged"
	PlanDelete    PlanAction = "Delete"
	PlanSkip      PlanAction = "Skip"
	PlanError     PlanAction = "Error"
)
