package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/dashboard"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/plans"
)

// dashboardFlags configure the dashboard, served by the controller and by `cairn
// dashboard`.
type dashboardFlags struct {
	addr          string
	anonymousRead bool
	commitURL     string
}

func (f *dashboardFlags) registerCommitURL(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.commitURL, "dashboard-commit-url", "",
		"the URL of a commit on the forge, {sha} replaced by the SHA (default: from the repository's URL, as GitHub, GitLab and Gitea lay it out)")
}

// commitURLs links a revision to its commit: the template, else one made from the
// repository's URL (https://HOST/OWNER/NAME/commit/SHA, which GitHub, GitLab and
// Gitea all serve); nil when neither gives one.
func commitURLs(template, repoURL string) func(string) string {
	if template == "" {
		template = commitTemplateOf(repoURL)
	}
	if template == "" {
		return nil
	}
	return func(sha string) string { return strings.ReplaceAll(template, "{sha}", url.PathEscape(sha)) }
}

func commitTemplateOf(repoURL string) string {
	if m := scpLike.FindString(repoURL); m != "" { // git@host:owner/name.git
		host := strings.TrimSuffix(m[strings.Index(m, "@")+1:], ":")
		repoURL = "https://" + host + "/" + strings.TrimPrefix(repoURL, m)
	}
	u, err := url.Parse(repoURL)
	if err != nil || u.Host == "" {
		return ""
	}
	switch u.Scheme {
	case "https", "http", "ssh":
	default:
		return ""
	}
	scheme := u.Scheme
	if scheme == "ssh" {
		scheme = "https"
	}
	host := u.Hostname()
	if scheme != "https" || u.Port() != "" && u.Scheme != "ssh" {
		host = u.Host
	}
	path := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if path == "" {
		return ""
	}
	return scheme + "://" + host + "/" + path + "/commit/{sha}"
}

// serveControllerDashboard serves the dashboard on every replica of the controller
// (it reads the manager's informer cache, so a replica that does not lead serves it
// too): users log in with a bearer token, checked by a TokenReview; what they see
// and do is decided by SubjectAccessReviews; their requests and reads are made with
// their own token.
func serveControllerDashboard(ctx context.Context, mgr manager.Manager, cfg *rest.Config, f *dashboardFlags, repo *repoFlags,
	log logr.Logger) error {
	if f.addr == "" || f.addr == "0" {
		return nil
	}
	live, err := client.New(cfg, client.Options{Scheme: reconciler.Scheme})
	if err != nil {
		return err
	}
	repoURL, _ := repo.url()
	s, err := dashboard.New(dashboard.Options{
		Reader: mgr.GetClient(), Live: live, Namespace: repo.namespace, Log: log,
		Plans:     &plans.Store{Client: live, Namespace: repo.namespace},
		Auth:      &dashboard.TokenReviewer{Client: live, AnonymousRead: f.anonymousRead},
		Authz:     &dashboard.SubjectAccessReviewer{Client: live},
		Act:       &dashboard.UserToken{Config: cfg, Options: client.Options{Scheme: reconciler.Scheme, Mapper: mgr.GetRESTMapper()}},
		CommitURL: commitURLs(f.commitURL, repoURL),
	})
	if err != nil {
		return err
	}
	if err := dashboard.Watch(ctx, mgr.GetCache(), s.Hub()); err != nil {
		return err
	}
	if err := dashboard.WatchPlans(ctx, mgr.GetCache(), repo.namespace, s.Hub()); err != nil { // cairn's namespace only (namespaceCache)
		return err
	}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		log.Info("serving the dashboard", "address", ln.Addr().String(), "anonymousRead", f.anonymousRead)
		return dashboard.Serve(ctx, ln, s, log)
	}))
}

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

func newDashboardCommand(kube *kubeFlags) *cobra.Command {
	var (
		f         dashboardFlags
		namespace string
		logF      logFlags
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the dashboard on this machine, as the kubeconfig's user (as kubectl proxy does)",
		Long: `Serve cairn's dashboard on 127.0.0.1 with the kubeconfig's identity: it shows what that user may read,
and makes the requests that user may make. The URL it prints carries a one-time key to the session: anyone
with it acts as you, so it is printed only here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logF.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return runLocalDashboard(cmd, kube, &f, namespace, log)
		},
	}
	cmd.Flags().StringVar(&f.addr, "address", "127.0.0.1:8090", "where to serve it (keep it on the loopback: whoever reaches it with the key acts as you)")
	cmd.Flags().StringVar(&namespace, "namespace", reconciler.DefaultNamespace, "cairn's namespace")
	f.registerCommitURL(cmd)
	logF.register(cmd)
	return cmd
}

func runLocalDashboard(cmd *cobra.Command, kube *kubeFlags, f *dashboardFlags, namespace string, log logr.Logger) error {
	ctx := cmd.Context()
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	live, err := client.New(cfg, client.Options{Scheme: reconciler.Scheme})
	if err != nil {
		return err
	}
	user := whoAmI(ctx, live)
	if user == "" {
		return fmt.Errorf("the cluster does not say who the kubeconfig's user is (SelfSubjectReview): the dashboard acts as that user only")
	}
	// Secrets: the plans' only, in cairn's namespace, without their data.
	c, err := cache.New(cfg, cache.Options{Scheme: reconciler.Scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{namespace: {}}, Label: labels.SelectorFromSet(labels.Set{plans.Label: "true"}),
			Transform: func(in any) (any, error) {
				if s, ok := in.(*corev1.Secret); ok {
					s.Data = nil
				}
				return in, nil
			}},
	}})
	if err != nil {
		return err
	}
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	secret := hex.EncodeToString(key)
	repoURL := platformRepository(ctx, live)
	s, err := dashboard.New(dashboard.Options{
		Reader: c, Live: live, Namespace: namespace, Log: log,
		Plans:     &plans.Store{Client: live, Namespace: namespace},
		Auth:      &dashboard.LocalSession{Secret: secret, User: dashboard.Identity{User: user}},
		KeyInURL:  true,
		Authz:     &dashboard.SelfAccessReviewer{Client: live},
		Act:       dashboard.Self{Client: live},
		CommitURL: commitURLs(f.commitURL, repoURL),
	})
	if err != nil {
		return err
	}
	if err := dashboard.Watch(ctx, c, s.Hub()); err != nil {
		return err
	}
	if mayWatchPlans(ctx, live, namespace) { // else the plans are not shown anyway: no watch that could never sync
		if err := dashboard.WatchPlans(ctx, c, namespace, s.Hub()); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	synced, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !c.WaitForCacheSync(synced) {
		return fmt.Errorf("failed to read the ModuleInstances and the Platform within a minute: %s needs to list and watch them "+
			"cluster-wide (ClusterRole cairn-dashboard-view); a user of some namespaces reads the controller's dashboard instead", user)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "cairn dashboard, as %s: http://%s/login?key=%s\n(Ctrl-C stops it)\n", user, ln.Addr(), secret)
	return dashboard.Serve(ctx, ln, s, log)
}

// platformRepository is the repository the Platform CR says it syncs ("" when
// unknown).
func platformRepository(ctx context.Context, c client.Client) string {
	var p cairnv1.Platform
	if err := c.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p); err != nil {
		return ""
	}
	return p.Status.Repository
}

// mayWatchPlans tells whether the kubeconfig's user may list and watch the Secrets
// of cairn's namespace, where the plans are kept.
func mayWatchPlans(ctx context.Context, c client.Client, namespace string) bool {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Resource: "secrets"}}}
		if err := c.Create(ctx, review); err != nil || !review.Status.Allowed {
			return false
		}
	}
	return true
}
