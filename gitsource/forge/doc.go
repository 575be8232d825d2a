// Package forge owns cairn's conversation with a Git forge (Gitea, GitHub,
// GitLab, ...): the small Forge interface its API clients implement (commit
// statuses, the one plan comment on a pull request, a pull request's base and
// head), the bounded asynchronous Queue that posts through it without ever
// blocking a sync, the webhook Receiver that turns signed forge deliveries into
// typed events, and the Markdown cutter that fits a plan into a forge's comment
// limit.
//
// # Providers
//
// Each forge is one Provider type in its own sub-package (gitea, github,
// gitlab): it builds the forge's API client and owns its webhooks, the
// signature check and the payload parsing, with the helpers this package
// exports (VerifyHMAC, VerifyToken, DecodePayload, NewPush, NewPullRequest,
// Ignore). A Registry lists providers by name; package providers holds the one
// list of the forges cairn ships. The CLI looks --forge up in it and the
// Receiver serves /hooks/<name> for each Hook it is given, so this package and
// the commands name no forge: a new forge is a new package and one line in
// package providers. This package imports none of the forges.
//
// # Trust
//
// A webhook only ever wakes cairn up: the SHA a payload carries is passed on
// as a hint (Push.SHAHint) and never as the revision to apply; the sync loop
// fetches and reads the branch head itself. Every delivery is authenticated
// by its provider (HMAC-SHA256 for Gitea and GitHub, the shared token for
// GitLab, compared in constant time) before its body is parsed, the body is capped before it is
// read, each source address is rate limited, and a malformed payload gets 400,
// never a panic.
//
// # Secrets
//
// Clients take their token as a string (read by the caller from a Secret or a
// file) and never log it; every error they return has the token scrubbed out
// (see Redact), and a commit status description is redacted, flattened to one
// line and cut to the forge's limit before it is sent.
package forge
