package supply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// SecretSource reads the Secrets and ConfigMaps Registries name.
type SecretSource interface {
	Secret(ctx context.Context, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error)
}

// NamespaceSecrets is a SecretSource that reads one namespace of the cluster.
type NamespaceSecrets struct {
	Client    client.Reader
	Namespace string
}

// Secret reads the Secret name of the namespace.
func (n NamespaceSecrets) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := n.Client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: name}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ConfigMap reads the ConfigMap name of the namespace.
func (n NamespaceSecrets) ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	if err := n.Client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: name}, &cm); err != nil {
		return nil, err
	}
	return &cm, nil
}

// Config is what a Chain is built with.
type Config struct {
	// Mode is the Platform's verify mode ("" lets each Registry decide: Enforce
	// when it declares keys, nothing when it does not).
	Mode cairnv1.VerifyMode
	// Secrets reads what Registries name; nil means there is no cluster (an
	// offline render).
	Secrets SecretSource
	// RegistryConfig is a docker config the user passed explicitly (nil: none).
	RegistryConfig []byte
	// Verifier caches signature checks across syncs.
	Verifier *sign.Verifier
}

// registryState is what one sync knows about one Registry: a client with its
// credentials and CAs, its trusted keys, and its signing key.
type registryState struct {
	reg    *cairnv1.Registry
	client *sign.Client
	creds  *sign.Credentials
	caPEM  []byte
	keys   []*sign.PublicKey
	keyIDs string
	// keysOffline: the Registry declares keys, but there is no cluster to read
	// them from (cairn render); its artifacts are reported as not verified.
	keysOffline bool
	// failure makes the Registry unusable: every artifact from it fails with it.
	failure *outcome.Failure
	// signer is loaded on first use (publish only).
	signOnce sync.Once
	signer   *sign.PrivateKey
	signErr  *outcome.Failure
}

// Chain resolves, verifies and pulls the OCI artifacts of one sync, and publishes
// its renders. Tags are resolved once per sync: every later use of the same tag in
// the sync gets the same digest. It is safe for concurrent use.
type Chain struct {
	mode           cairnv1.VerifyMode
	secrets        SecretSource
	registryConfig []byte
	verifier       *sign.Verifier
	regs           map[string]*registryState // by Registry name
	byHost         map[string]*registryState

	mu       sync.Mutex
	resolved map[string]*resolution // host/repo:tag
}

// resolution is a tag resolved and checked once per sync; status.Digest is the
// digest to pull when fail is nil.
type resolution struct {
	once   sync.Once
	status cairnv1.ArtifactStatus
	fail   *outcome.Failure
}

// New loads every declared Registry's credentials, CAs and keys. A Registry that
// cannot be loaded is not an error of the sync: its failure is given to every
// artifact that needs it (see RegistryFailure).
func New(ctx context.Context, cfg Config, regs []*cairnv1.Registry) *Chain {
	sc := &Chain{
		mode: cfg.Mode, secrets: cfg.Secrets, registryConfig: cfg.RegistryConfig, verifier: cfg.Verifier,
		regs: map[string]*registryState{}, byHost: map[string]*registryState{}, resolved: map[string]*resolution{},
	}
	for _, reg := range regs {
		st := sc.load(ctx, reg)
		sc.regs[reg.Name] = st
		if _, dup := sc.byHost[reg.Spec.Hostname]; !dup {
			sc.byHost[reg.Spec.Hostname] = st
		}
	}
	return sc
}

// RegistryFailure is why the Registry name cannot be used in this sync: nil when it
// loaded, or is not declared.
func (sc *Chain) RegistryFailure(name string) *outcome.Failure {
	if st := sc.regs[name]; st != nil {
		return st.failure
	}
	return nil
}

func (sc *Chain) load(ctx context.Context, reg *cairnv1.Registry) *registryState {
	st := &registryState{reg: reg}
	st.failure = sc.loadAccess(ctx, st)
	if st.failure == nil {
		st.failure = sc.loadKeys(ctx, st)
	}
	if st.failure == nil {
		ep := sign.Endpoint{Host: reg.Spec.Hostname, PlainHTTP: reg.Spec.PlainHTTP, CAPEM: st.caPEM, Credentials: st.creds}
		if reg.Spec.Timeout != nil {
			ep.Timeout = reg.Spec.Timeout.Duration
		}
		c, err := sign.NewClient(ep)
		if err != nil {
			st.failure = outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: %w", reg.Name, err))
		}
		st.client = c
	}
	return st
}

// loadAccess reads the Registry's credentials and CA bundle.
func (sc *Chain) loadAccess(ctx context.Context, st *registryState) *outcome.Failure {
	spec := st.reg.Spec
	if spec.SecretRef != nil && sc.secrets == nil && sc.registryConfig != nil {
		// Offline: the Secret is in the cluster; the explicit docker config stands in.
		creds, err := sign.DockerConfigCredentials(sc.registryConfig, spec.Hostname)
		if err != nil {
			return outcome.NewStalled(cairnv1.ReasonUnsupportedSecret, fmt.Errorf("Registry %s: --registry-config: %w", st.reg.Name, err))
		}
		st.creds = creds
	} else if spec.SecretRef != nil {
		s, f := sc.secret(ctx, st.reg.Name, spec.SecretRef.Name)
		if f != nil {
			return f
		}
		creds, err := sign.CredentialsFromSecret(spec.Hostname, string(s.Type), s.Data)
		if err != nil {
			return outcome.NewStalled(cairnv1.ReasonUnsupportedSecret, fmt.Errorf("Registry %s: Secret %s: %w", st.reg.Name, spec.SecretRef.Name, err))
		}
		st.creds = creds
	} else if sc.registryConfig != nil {
		// Only a docker config the user passed explicitly, and only its entry for this host.
		if creds, err := sign.DockerConfigCredentials(sc.registryConfig, spec.Hostname); err == nil {
			st.creds = creds
		}
	}
	if spec.CAConfigMap != "" {
		if sc.secrets == nil {
			return outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: ConfigMap %s cannot be read without a cluster", st.reg.Name, spec.CAConfigMap))
		}
		cm, err := sc.secrets.ConfigMap(ctx, spec.CAConfigMap)
		if err != nil {
			return missing(st.reg.Name, "ConfigMap", spec.CAConfigMap, err)
		}
		ca := cm.Data["ca.crt"]
		if ca == "" {
			return outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: ConfigMap %s has no ca.crt", st.reg.Name, spec.CAConfigMap))
		}
		st.caPEM = []byte(ca)
	}
	return nil
}

// loadKeys reads the Registry's trusted cosign public keys.
func (sc *Chain) loadKeys(ctx context.Context, st *registryState) *outcome.Failure {
	v := st.reg.Spec.Verify
	if v == nil || v.Cosign == nil {
		return nil
	}
	if sc.secrets == nil {
		st.keysOffline = true // the keys are in the cluster: reported, not checked
		return nil
	}
	var ids []string
	for _, pk := range v.Cosign.PublicKeys {
		s, f := sc.secret(ctx, st.reg.Name, pk.SecretRef.Name)
		if f != nil {
			return f
		}
		key := pk.SecretRef.Key
		if key == "" {
			key = "cosign.pub"
		}
		data := s.Data[key]
		if len(data) == 0 {
			return outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: Secret %s has no key %q", st.reg.Name, pk.SecretRef.Name, key))
		}
		pub, err := sign.LoadPublicKey(data)
		if err != nil {
			return outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: Secret %s key %q: %w", st.reg.Name, pk.SecretRef.Name, key, err))
		}
		st.keys = append(st.keys, pub)
		ids = append(ids, pub.ID())
	}
	sort.Strings(ids)
	st.keyIDs = strings.Join(ids, ",")
	return nil
}

func (sc *Chain) secret(ctx context.Context, registry, name string) (*corev1.Secret, *outcome.Failure) {
	if sc.secrets == nil {
		return nil, outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: Secret %s cannot be read without a cluster", registry, name))
	}
	s, err := sc.secrets.Secret(ctx, name)
	if err != nil {
		return nil, missing(registry, "Secret", name, err)
	}
	return s, nil
}

// missing types a Secret or ConfigMap that could not be read: absent may be fixed by
// creating it, so it is retried; the error never carries the object's data.
func missing(registry, kind, name string, err error) *outcome.Failure {
	if apierrors.IsNotFound(err) {
		return outcome.NewTransient(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: %s %s not found in cairn's namespace", registry, kind, name))
	}
	return outcome.NewTransient(cairnv1.ReasonRegistryNotReady, fmt.Errorf("Registry %s: failed to read %s %s: %s", registry, kind, name, apiReason(err)))
}

func apiReason(err error) string {
	if s := apierrors.ReasonForError(err); s != "" && s != "Unknown" {
		return string(s)
	}
	return err.Error()
}

// policy is how artifacts of st are checked: the Platform's mode, or, when it is
// unset, Enforce for a Registry with keys and nothing for one without.
func (sc *Chain) policy(st *registryState) cairnv1.VerifyMode {
	switch {
	case sc.mode != "":
		return sc.mode
	case len(st.keys) > 0 || st.keysOffline:
		return cairnv1.VerifyEnforce
	}
	return ""
}

// verifyID identifies st's verification policy for the render's module cache.
func (sc *Chain) verifyID(st *registryState) string {
	p := sc.policy(st)
	if p == "" || p == cairnv1.VerifyOff {
		return ""
	}
	return string(p) + "/" + st.keyIDs
}

// ModuleRegistry is the render's view of the Registry name (the Platform's module
// registry): nil and no failure when it is not declared, its failure when it could
// not be loaded. Its Verifier is the Chain when its artifacts are checked.
func (sc *Chain) ModuleRegistry(name string) (*render.ModuleRegistry, *outcome.Failure) {
	st := sc.regs[name]
	if st == nil {
		return nil, nil
	}
	if st.failure != nil {
		return nil, st.failure
	}
	mr := &render.ModuleRegistry{
		Host: st.reg.Spec.Hostname, PlainHTTP: st.reg.Spec.PlainHTTP,
		CAPEM: string(st.caPEM), VerifyID: sc.verifyID(st),
	}
	if st.creds != nil {
		mr.Username, mr.Password = st.creds.Username, st.creds.Password
	}
	if st.reg.Spec.Timeout != nil {
		mr.Timeout = st.reg.Spec.Timeout.Duration
	}
	if mr.VerifyID != "" {
		mr.Verifier = sc
	}
	return mr, nil
}

// ResolveVerified implements render.ModuleVerifier: the module registry's tag is
// resolved and checked once per sync; Enforce refuses what does not verify.
func (sc *Chain) ResolveVerified(ctx context.Context, host, repo, tag string) (string, error) {
	st := sc.byHost[host]
	if st == nil {
		return "", fmt.Errorf("no Registry declares host %s", host)
	}
	res := sc.resolve(ctx, st, repo, tag)
	if res.fail != nil {
		return "", res.fail
	}
	return res.status.Digest, nil
}

// resolve resolves host/repo:tag once per sync and checks its signature by the
// Registry's policy.
func (sc *Chain) resolve(ctx context.Context, st *registryState, repo, tag string) *resolution {
	key := st.reg.Spec.Hostname + "/" + repo + ":" + tag
	sc.mu.Lock()
	res := sc.resolved[key]
	if res == nil {
		res = &resolution{}
		sc.resolved[key] = res
	}
	sc.mu.Unlock()
	res.once.Do(func() {
		res.status = cairnv1.ArtifactStatus{Ref: key}
		if st.failure != nil {
			res.fail = st.failure
			res.status.Verification, res.status.Reason, res.status.Message = cairnv1.VerificationFailed, st.failure.Reason, st.failure.Error()
			return
		}
		var dgst digest.Digest
		if d, err := digest.Parse(tag); err == nil {
			dgst = d
			res.status.Ref = st.reg.Spec.Hostname + "/" + repo + "@" + tag
		} else {
			desc, err := st.client.Resolve(ctx, repo, tag)
			if err != nil {
				res.fail = artifactFailure(err)
				res.status.Verification, res.status.Reason, res.status.Message = cairnv1.VerificationFailed, res.fail.Reason, res.fail.Error()
				return
			}
			dgst = desc.Digest
		}
		res.status.Digest = dgst.String()
		sc.check(ctx, st, repo, dgst, res)
	})
	return res
}

// check verifies dgst by st's policy and records the result on res.
func (sc *Chain) check(ctx context.Context, st *registryState, repo string, dgst digest.Digest, res *resolution) {
	policy := sc.policy(st)
	switch {
	case st.keysOffline && policy != cairnv1.VerifyOff:
		res.status.Verification = cairnv1.VerificationUnverified
		res.status.Message = fmt.Sprintf("not checked: the keys of Registry %s are in the cluster", st.reg.Name)
		return
	case policy == cairnv1.VerifyOff:
		res.status.Verification = cairnv1.VerificationSkipped
		res.status.Message = "verify.mode is Off"
		return
	case policy == "":
		res.status.Verification = cairnv1.VerificationUnverified
		res.status.Message = fmt.Sprintf("Registry %s declares no cosign keys", st.reg.Name)
		return
	case len(st.keys) == 0:
		err := &sign.Error{Reason: sign.ReasonSignatureMissing, Op: "verify", Ref: res.status.Ref,
			Err: fmt.Errorf("Registry %s declares no cosign keys to verify with", st.reg.Name)}
		refuse(policy, res, err)
		return
	}
	result, _, err := sc.verifier.VerifyCached(ctx, st.client, repo, dgst, st.keys)
	if err != nil {
		refuse(policy, res, err)
		return
	}
	res.status.Verification, res.status.KeyID = cairnv1.VerificationVerified, result.KeyID
}

// refuse records a failed check: Enforce fails the artifact, Warn reports it.
func refuse(policy cairnv1.VerifyMode, res *resolution, err error) {
	f := artifactFailure(err)
	res.status.Message = f.Error()
	if policy == cairnv1.VerifyWarn {
		res.status.Verification = cairnv1.VerificationUnverified
		return
	}
	res.status.Verification, res.status.Reason = cairnv1.VerificationFailed, f.Reason
	res.fail = f
}

// artifactFailure types an error of the sign package: bad or missing signatures and
// refused access stall; an unreachable registry is transient. A Failure is returned
// as it is.
func artifactFailure(err error) *outcome.Failure {
	var f *outcome.Failure
	if errors.As(err, &f) {
		return f
	}
	switch sign.Reason(err) {
	case sign.ReasonSignatureMissing:
		return outcome.NewStalled(cairnv1.ReasonSignatureMissing, err)
	case sign.ReasonSignatureInvalid, sign.ReasonInvalidKey:
		return outcome.NewStalled(cairnv1.ReasonSignatureInvalid, err)
	}
	reason := sign.Reason(err) // FetchFailed, Unauthorized, NotFound, DigestMismatch, TooLarge, ...
	if reason == "" {
		reason = cairnv1.ReasonArtifactFailed
	}
	if sign.Transient(err) {
		return outcome.NewTransient(reason, err)
	}
	return outcome.NewStalled(reason, err)
}

// registryForHost returns the Registry declared for host.
func (sc *Chain) registryForHost(host string) (*registryState, *outcome.Failure) {
	st := sc.byHost[host]
	if st == nil {
		return nil, outcome.NewStalled(cairnv1.ReasonRegistryNotReady, fmt.Errorf("no Registry declares host %s: declare one (with its credentials and keys) to pull from it", host))
	}
	return st, nil
}
