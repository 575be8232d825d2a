package gitea

import (
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/ghhook"
)

// actions maps Gitea's pull request actions to cairn's.
var actions = map[string]string{
	"opened": forge.PROpened, "synchronized": forge.PRSynchronize, "reopened": forge.PRReopened, "edited": forge.PREdited, "closed": forge.PRClosed,
}

// Parse implements forge.Webhook for the push and pull_request events, whose
// payloads Gitea shapes as GitHub does.
func (Provider) Parse(event string, body []byte) (forge.Event, error) {
	return ghhook.Parse(Name, actions, event, body)
}
