package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

// Scheme holds the Kubernetes built-in types and cairn's.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cairnv1.AddToScheme(s)
	return s
}

// Cluster holds the clients cairn uses against one API server: its own identity for
// render, status and inventory, and an impersonating resource manager per ServiceAccount.
type Cluster struct {
	config *rest.Config
	mapper meta.RESTMapper
	client client.Client
	// discovery reads the version and API versions the cluster serves, uncached
	// (see discoverCapabilities).
	discovery discoverer

	mu       sync.Mutex
	managers map[string]*ssa.ResourceManager

	// health serves the health waits from watches (see WatchHealth); nil: by GETs.
	health *apply.HealthWatch
}

// NewCluster connects to the API server of config. Discovery is lazy: a kind is looked
// up the first time it is used.
func NewCluster(config *rest.Config) (*Cluster, error) {
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, fmt.Errorf("failed to create HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("failed to create REST mapper: %w", err)
	}
	c, err := newClient(config, httpClient, mapper)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("failed to create discovery client: %w", err)
	}
	return &Cluster{config: config, mapper: mapper, client: c, discovery: dc, managers: map[string]*ssa.ResourceManager{}}, nil
}

func newClient(config *rest.Config, httpClient *http.Client, mapper meta.RESTMapper) (client.Client, error) {
	c, err := client.New(config, client.Options{Scheme: Scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return c, nil
}

// WatchHealth makes the health waits of syncs from now on read workloads from
// watches that run until ctx ends (see apply.HealthWatch), where cairn may list them;
// without it every wait reads its objects by GET as the instance's identity. Call it
// once, before the first sync.
func (c *Cluster) WatchHealth(ctx context.Context) error {
	w, err := apply.NewHealthWatch(ctx, c.config)
	if err != nil {
		return fmt.Errorf("failed to create the health watch: %w", err)
	}
	c.health = w
	return nil
}

// Client is cairn's own client.
func (c *Cluster) Client() client.Client { return c.client }

// Mapper is the shared lazy REST mapper.
func (c *Cluster) Mapper() meta.RESTMapper { return c.mapper }

// Manager returns the resource manager acting as serviceAccount in namespace; an empty
// serviceAccount acts as cairn itself.
func (c *Cluster) Manager(namespace, serviceAccount string) (*ssa.ResourceManager, error) {
	key := namespace + "/" + serviceAccount
	if serviceAccount == "" {
		key = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.managers[key]; ok {
		return m, nil
	}
	m, err := c.newManager(namespace, serviceAccount)
	if err != nil {
		return nil, err
	}
	c.managers[key] = m
	return m, nil
}

func (c *Cluster) newManager(namespace, serviceAccount string) (*ssa.ResourceManager, error) {
	cl := c.client
	if serviceAccount != "" {
		cfg := rest.CopyConfig(c.config)
		// No groups: the API server gives an impersonated ServiceAccount its own
		// (system:serviceaccounts, system:serviceaccounts:<ns>, system:authenticated),
		// so cairn needs no right to impersonate groups, which would be any group.
		cfg.Impersonate = rest.ImpersonationConfig{UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount)}
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("failed to create impersonating HTTP client: %w", err)
		}
		if cl, err = newClient(cfg, httpClient, c.mapper); err != nil {
			return nil, err
		}
	}
	poller := polling.NewStatusPoller(cl, c.mapper, polling.Options{})
	m := ssa.NewResourceManager(cl, poller, ssa.Owner{Field: cairnv1.FieldManager, Group: "cairn.dev"})
	m.SetConcurrency(8)
	return m, nil
}
