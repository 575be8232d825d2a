// Package dashboard serves cairn's web dashboard: the fleet of instances, each
// instance's conditions, history, inventory and events, live, with the requests
// a user may make of an instance (docs/dashboard.md).
//
// Pages are HTML rendered on the server from Go templates (html/template escapes
// every value: annotations and messages are attacker-written), with the stylesheet
// and the one script embedded in the binary; the script only swaps in a fresh copy
// of the page when the server says something changed (server-sent events), so
// every page reads without it. A strict Content-Security-Policy allows no inline
// script or style.
//
// Who sees what is Kubernetes' to say: a bearer token (a ServiceAccount's or the
// cluster's OIDC token), checked with a TokenReview, and a SubjectAccessReview of
// that user per namespace filters every view and authorises every request, which
// is then made with the user's own token (so the API server authorises and audits
// it as theirs) and recorded as an Event. Served
// locally (cairn dashboard), the user is the kubeconfig's, and a secret in the
// printed URL is the key to the session.
package dashboard
