package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// Bad input that reaches the core (declarations, Git, render): each test starts from a
// repository that synced fine, commits the bad input, and checks the typed outcome, the
// file, object or field it names, and that the last good state stays in place.

// syncClean syncs repo, expects no failure and returns the revision.
func (e *env) syncClean(repo *gitRepo) string {
	e.t.Helper()
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	return res.Revision
}

// expectLastGood checks that an app-module instance keeps its Deployment and the
// ConfigMaps of configKeys, and that its status still records rev as last applied.
func (e *env) expectLastGood(name, rev string, configKeys ...string) {
	e.t.Helper()
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, name)).To(BeFalse(), "Deployment %s was deleted", name)
	for _, k := range configKeys {
		e.g.Expect(e.configMap(e.ns, name+"-"+k)).NotTo(BeNil(), "ConfigMap %s-%s was deleted", name, k)
	}
	mi := e.instance(e.ns, name)
	e.g.Expect(mi).NotTo(BeNil(), "ModuleInstance %s was deleted", name)
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(rev), "last applied revision of %s", name)
}

// mainBranchRef is the branch newGitRepo commits to.
var mainBranchRef = plumbing.NewBranchReferenceName("main")

func isTrueCondition(obj conditions.Getter, t string) bool { return conditions.IsTrue(obj, t) }

func (e *env) platformCR() *cairnv1.Platform {
	e.t.Helper()
	p := &cairnv1.Platform{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: cairnv1.PlatformName}, p)).To(Succeed())
	return p
}

// withRenderLimits replaces the engine by one whose renders have the limits l.
func (e *env) withRenderLimits(l render.Limits) {
	e.t.Helper()
	e.withOptions(func(o *reconciler.Options) { o.RenderLimits = l })
}

// withOptions replaces the engine by one with the test defaults adjusted by tune.
func (e *env) withOptions(tune func(*reconciler.Options)) {
	e.t.Helper()
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(e.cache, "modules")
	opts.DefaultTimeout = time.Minute
	opts.Progress = e.progress
	tune(&opts)
	e.engine = reconciler.New(cluster, render.NewRenderer(), opts)
}

// lineOf returns the 1-based line of the first line of doc that starts with prefix.
func lineOf(doc, prefix string) int {
	for i, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	return 0
}

// localInstanceYAML declares an instance of the local module at path with raw values.
func localInstanceYAML(name, ns, path, values string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: %s\n  timeout: 1m\n  values: %s\n", name, ns, path, values)
}

// wantFailure is a failed result a bad commit must give.
type wantFailure struct {
	ns, name string // "" ns means the test's namespace; "" name a problem of a file
	reason   string
	contains []string // "{ns}" stands for the test's namespace
}

func (e *env) expectFailure(res *reconciler.SyncResult, w wantFailure) {
	e.t.Helper()
	ns := w.ns
	if ns == "" && w.name != "" {
		ns = e.ns
	}
	r := result(res, ns, w.name)
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%s/%s: %+v", ns, w.name, r)
	e.g.Expect(r.Reason).To(Equal(w.reason), "%s/%s: %s", ns, w.name, r.Message)
	for _, s := range w.contains {
		e.g.Expect(r.Message).To(ContainSubstring(strings.ReplaceAll(s, "{ns}", e.ns)))
	}
}

// aliasBomb is a ModuleInstance whose values expand to 9^9 strings.
func aliasBomb(ns string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: bomb\n  namespace: %s\n", ns)
	b.WriteString("spec:\n  module:\n    local:\n      path: ./modules/app\n  values:\n")
	b.WriteString(`    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for prev, c := 'a', 'b'; c <= 'i'; prev, c = c, c+1 {
		fmt.Fprintf(&b, "    %c: &%c [%s]\n", c, c, strings.TrimSuffix(strings.Repeat("*"+string(prev)+",", 9), ","))
	}
	return b.String()
}

// badDeclaration is a commit that breaks the declarations of a repository holding the
// instances a (configs x) and b.
type badDeclaration struct {
	name string
	bad  func(e *env, a, b inst) (map[string]string, []wantFailure)
}

var badDeclarations = []badDeclaration{
	{"invalid YAML in an instance file", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		doc := "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: a\n  namespace: " + e.ns + "\nspec: [unclosed\n"
		return map[string]string{"instances/a.yaml": doc}, []wantFailure{
			{name: "", reason: declarations.ReasonInvalidYAML, contains: []string{"instances/a.yaml:", "invalid YAML"}},
			{name: "a", reason: cairnv1.ReasonInvalidDeclaration, contains: []string{"instances/a.yaml", "not removing it"}},
		}
	}},
	{"unknown field", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		a.extra = "  valuez:\n    replicas: 2\n"
		doc := a.yaml()
		at := fmt.Sprintf("instances/a.yaml:%d", lineOf(doc, "  valuez:"))
		return map[string]string{"instances/a.yaml": doc}, []wantFailure{
			{name: "a", reason: declarations.ReasonInvalidDeclaration, contains: []string{at, "spec.valuez", "unknown field"}},
		}
	}},
	{"duplicate instance across two files", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		return map[string]string{"instances/a-again.yaml": a.yaml()}, []wantFailure{
			{name: "a", reason: declarations.ReasonDuplicateDeclaration,
				contains: []string{"declared more than once", "instances/a-again.yaml:1", "instances/a.yaml:1"}},
		}
	}},
	{"dependsOn cycle", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		a.dependsOn, b.dependsOn = []string{"b"}, []string{"a"}
		cycle := "dependency cycle: {ns}/a -> {ns}/b -> {ns}/a"
		return map[string]string{"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml()}, []wantFailure{
			{name: "a", reason: declarations.ReasonDependencyCycle, contains: []string{"spec.dependsOn[0]", cycle}},
			{name: "b", reason: declarations.ReasonDependencyCycle, contains: []string{"spec.dependsOn[0]", cycle}},
		}
	}},
	{"namespace of existing instances becomes denied", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		p := strings.Replace(platformYAML(""), `deny: ["kube-*"]`, `deny: ["kube-*", "`+e.ns+`"]`, 1)
		msg := `namespace "{ns}" is denied by the Platform's pattern "{ns}"`
		return map[string]string{"platform.yaml": p}, []wantFailure{
			{name: "a", reason: declarations.ReasonNamespaceDenied, contains: []string{"metadata.namespace", msg}},
			{name: "b", reason: declarations.ReasonNamespaceDenied, contains: []string{"metadata.namespace", msg}},
		}
	}},
	{"new instance in a denied namespace", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		x := inst{name: "intruder", ns: "kube-" + e.ns}
		return map[string]string{"instances/intruder.yaml": x.yaml()}, []wantFailure{
			{ns: "kube-" + e.ns, name: "intruder", reason: declarations.ReasonNamespaceDenied,
				contains: []string{"instances/intruder.yaml:5", `namespace "kube-{ns}" is denied by the Platform's pattern "kube-*"`}},
		}
	}},
	{"dangling dependsOn", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		a.dependsOn = []string{"ghost"}
		doc := a.yaml()
		at := fmt.Sprintf("instances/a.yaml:%d", lineOf(doc, "    - name: ghost"))
		return map[string]string{"instances/a.yaml": doc}, []wantFailure{
			{name: "a", reason: declarations.ReasonDanglingReference,
				contains: []string{at, "spec.dependsOn[0]", "ModuleInstance {ns}/ghost is not declared"}},
		}
	}},
	{"YAML alias bomb", func(e *env, a, b inst) (map[string]string, []wantFailure) {
		return map[string]string{"instances/bomb.yaml": aliasBomb(e.ns)}, []wantFailure{
			{name: "bomb", reason: declarations.ReasonTooLarge, contains: []string{"instances/bomb.yaml:", "alias bomb"}},
		}
	}},
}

func TestBadDeclarationsKeepLastGoodState(t *testing.T) {
	for _, tt := range badDeclarations {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
			b := inst{name: "b", ns: e.ns, replicas: 0}
			repo := newGitRepo(t, appRepo("", a, b))
			good := e.syncClean(repo)

			files, want := tt.bad(e, a, b)
			repo.commit(tt.name, files)
			start := time.Now()
			res := e.sync(repo)
			e.g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
			e.g.Expect(res.Error).NotTo(HaveOccurred())
			for _, w := range want {
				e.expectFailure(res, w)
				if w.name == "" || (w.ns != "" && w.ns != e.ns) {
					continue
				}
				if mi := e.instance(e.ns, w.name); mi != nil {
					// an existing instance shows the problem on its CR, keeping its last good revision
					e.g.Expect(isTrue(mi, "Ready")).To(BeFalse(), w.name)
					e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue(), w.name)
					e.g.Expect(mi.Status.LastAttemptedRevision).NotTo(Equal(good), w.name)
				}
			}
			e.expectLastGood("a", good, "x")
			e.expectLastGood("b", good)
			e.g.Expect(e.get("v1", "Namespace", "", "kube-"+e.ns)).To(BeNil())
			e.g.Expect(e.platformCR().Status.Instances.Failed).To(BeNumerically(">=", 1))
		})
	}
}

func TestSecondPlatformRefusesTheWholeRevision(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	good := e.syncClean(repo)

	a.configs = configs("x", "y")
	bad := repo.commit("second platform", map[string]string{"platform-2.yaml": platformYAML(""), "instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Instances).To(BeEmpty())
	var f *outcome.Failure
	e.g.Expect(errors.As(res.Error, &f)).To(BeTrue(), "%v", res.Error)
	e.g.Expect(f.Kind).To(Equal(outcome.Stalled))
	e.g.Expect(f.Reason).To(Equal(cairnv1.ReasonInvalidDeclaration))
	var de *declarations.Error
	e.g.Expect(errors.As(res.Error, &de)).To(BeTrue())
	e.g.Expect(de.Reason).To(Equal(declarations.ReasonDuplicatePlatform))
	e.g.Expect(res.Error.Error()).To(And(ContainSubstring("platform-2.yaml:1"), ContainSubstring("platform.yaml:1")))

	e.expectLastGood("a", good, "x")
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "nothing of the refused revision is applied")
	p := e.platformCR()
	e.g.Expect(p.Status.LastSyncedRevision).To(Equal(good))
	e.g.Expect(p.Status.LastAttemptedRevision).To(Equal(bad))
	e.g.Expect(isTrueCondition(p, "Ready")).To(BeFalse())
	e.g.Expect(isTrueCondition(p, "Stalled")).To(BeTrue())
}

// commitSymlink adds a symbolic link name -> target to the index, then commits it with files.
func (g *gitRepo) commitSymlink(name, target string, files map[string]string) string {
	g.t.Helper()
	p := filepath.Join(g.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		g.t.Fatal(err)
	}
	wt, err := g.r.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := wt.Add(name); err != nil {
		g.t.Fatal(err)
	}
	return g.commit("add "+name, files)
}

// trySyncLimited is trySync with a Git source bounded by limits.
func (e *env) trySyncLimited(repo *gitRepo, limits gitsource.Limits) (*reconciler.SyncResult, error) {
	src, err := gitsource.New(gitsource.Options{URL: repo.url(), CacheDir: filepath.Join(e.cache, "git"), Limits: limits})
	if err != nil {
		return nil, err
	}
	head, err := src.Head(e.ctx)
	if err != nil {
		return nil, err
	}
	rev, err := reconciler.ReadRevision(e.ctx, src, head, "")
	if err != nil {
		return nil, err
	}
	return e.engine.Sync(e.ctx, rev)
}

// expectUntouched checks that a failed source read changed nothing: a (configs x)
// is as rev left it, a-y was not created and the Platform records no new attempt.
func (e *env) expectUntouched(rev string) {
	e.t.Helper()
	e.expectLastGood("a", rev, "x")
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "nothing of the refused commit is applied")
	p := e.platformCR()
	e.g.Expect(p.Status.LastSyncedRevision).To(Equal(rev))
	e.g.Expect(p.Status.LastAttemptedRevision).To(Equal(rev))
}

// twoModuleRepo is an app repository of instance a (module modules/app) and instance
// b (the same module copied to modules/b), each with the ConfigMap x.
func twoModuleRepo(e *env) (a, b inst, files map[string]string) {
	a = inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	b = inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
	files = appRepo("", a)
	files["modules/b/b.cue"] = strings.Replace(appModule, "package app", "package b", 1)
	files["modules/b/cue.mod/module.cue"] = appModuleFile
	files["instances/b.yaml"] = strings.Replace(b.yaml(), "./modules/app", "./modules/b", 1)
	return a, b, files
}

// TestSymlinksFailOnlyWhatReadsThem: a symbolic link is never followed nor read. A
// link where declarations are read is a file that could not be read (the instances
// sync, none is removed); a link in a module's directory fails that instance only,
// naming the link and the instance, and keeps its last good objects; the other
// instance syncs.
func TestSymlinksFailOnlyWhatReadsThem(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	tests := []struct {
		name, link, target string
		aFails             bool
	}{
		{"absolute symlink to /etc/passwd", "instances/passwd.yaml", "/etc/passwd", false},
		{"relative symlink escaping the tree", "modules/app/up.cue", "../../../../../../../../etc/passwd", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a, b, files := twoModuleRepo(e)
			repo := newGitRepo(t, files)
			good := e.syncClean(repo)

			a.configs, b.configs = configs("x", "y"), configs("x", "y")
			sha := repo.commitSymlink(tt.link, tt.target, map[string]string{"instances/a.yaml": a.yaml(),
				"instances/b.yaml": strings.Replace(b.yaml(), "./modules/app", "./modules/b", 1)})
			res, err := e.trySync(repo)
			e.g.Expect(err).NotTo(HaveOccurred())
			e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil(), "the other instance syncs")
			e.g.Expect(e.instance(e.ns, "b").Status.LastAppliedRevision).To(Equal(sha))
			if !tt.aFails {
				e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
				return
			}
			got := result(res, e.ns, "a")
			e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
			e.g.Expect(got.Reason).To(Equal("UnsafeModule"))
			e.g.Expect(got.Message).To(And(ContainSubstring(tt.link), ContainSubstring("symbolic link"), ContainSubstring(e.ns+"/a")))
			e.g.Expect(got.Message).NotTo(ContainSubstring(firstLine))
			e.expectLastGood("a", good, "x")
			e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "nothing of the failed render is applied")
		})
	}
}

// TestFileOverSizeCapFailsOnlyWhatReadsIt: a file over the Git source's size cap is
// listed without its content; a file nothing reads stops nothing, and the module that
// reads one fails alone, naming the file and the cap.
func TestFileOverSizeCapFailsOnlyWhatReadsIt(t *testing.T) {
	e := newEnv(t)
	limits := gitsource.Limits{MaxFileBytes: 256 << 10}
	a, _, files := twoModuleRepo(e)
	repo := newGitRepo(t, files)
	res, err := e.trySyncLimited(repo, limits)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	good := res.Revision

	a.configs = configs("x", "y")
	blob := strings.Repeat("cairn-oversized-content\n", 20_000)
	repo.commit("add large files", map[string]string{"assets/blob.txt": blob, "modules/b/blob.cue": "// " + blob, "instances/a.yaml": a.yaml()})
	res, err = e.trySyncLimited(repo, limits)
	e.g.Expect(err).NotTo(HaveOccurred())
	ra := result(res, e.ns, "a")
	e.g.Expect(ra.Ready).To(BeTrue(), "%+v", ra)
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "the commit is applied: nothing reads assets/blob.txt")
	rb := result(res, e.ns, "b")
	e.g.Expect(rb.Action).To(BeEquivalentTo("Failed"), "%+v", rb)
	e.g.Expect(rb.Message).To(And(ContainSubstring("blob.cue"), ContainSubstring("limit 262144")))
	e.g.Expect(rb.Message).NotTo(ContainSubstring("cairn-oversized-content"))
	e.expectLastGood("b", good, "x")
}

func TestDeletedBranchChangesNothing(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	good := e.syncClean(repo)

	e.g.Expect(repo.r.Storer.RemoveReference(mainBranchRef)).To(Succeed())
	res, err := e.trySync(repo)
	e.g.Expect(res).To(BeNil())
	e.g.Expect(err).To(MatchError(gitsource.ErrRefNotFound))
	e.g.Expect(gitsource.Reason(err)).To(Equal("RefNotFound"))
	e.g.Expect(err.Error()).To(ContainSubstring(`branch "main"`))
	e.expectUntouched(good)
}

func TestForcePushToUnrelatedHistoryStaysCorrect(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh cache %v", fresh), func(t *testing.T) {
			e := newEnv(t)
			a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
			b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
			c := inst{name: "c", ns: e.ns, replicas: 0}
			repo := newGitRepo(t, appRepo("", a, b, c))
			e.syncClean(repo)
			uidA, uidB := e.get("apps/v1", "Deployment", e.ns, "a").GetUID(), e.get("apps/v1", "Deployment", e.ns, "b").GetUID()

			// An orphan commit replaces the branch: b changes, c is gone, a is as it was.
			e.g.Expect(repo.r.Storer.RemoveReference(mainBranchRef)).To(Succeed())
			b.configs = configs("x", "y")
			sha := repo.commit("rewritten history", map[string]string{"instances/b.yaml": b.yaml(), "instances/c.yaml": ""})
			commit, err := repo.r.CommitObject(plumbing.NewHash(sha))
			e.g.Expect(err).NotTo(HaveOccurred())
			e.g.Expect(commit.NumParents()).To(Equal(0))
			if fresh {
				e.cache = t.TempDir() // a restarted reconciler: the old commit is unknown
			}

			res := e.sync(repo)
			e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
			e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Unchanged"))
			e.g.Expect(result(res, e.ns, "b").Action).To(BeEquivalentTo("Updated"))
			e.g.Expect(result(res, e.ns, "c").Action).To(BeEquivalentTo("Deleted"))
			e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a").GetUID()).To(Equal(uidA))
			e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b").GetUID()).To(Equal(uidB))
			e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil())
			e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil())
			e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "c")).To(BeTrue())
			e.g.Expect(e.platformCR().Status.LastSyncedRevision).To(Equal(sha))
		})
	}
}

// Modules of the instance "mod" (modules/custom), each on its own: a good one and the
// bad ones a commit replaces it with.
const (
	customModule = `package custom

instance: {name: string, namespace: string}
values: {}
objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-cm", data: v: "1"}
`
	syntaxErrorModule = `package custom

instance: {name: string, namespace: string}
values: {}
objects: cm: {apiVersion: "v1" kind: "ConfigMap"}
`
	notConcreteModule = `package custom

instance: {name: string, namespace: string}
values: {}
objects: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "\(instance.name)-cm"
	data: image: string
}
`
	tenObjectsModule = `package custom

import "list"

instance: {name: string, namespace: string}
values: {}
objects: {for i in list.Range(0, 10, 1) {"cm\(i)": {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-\(i)"}}}
`
	embedOutsideModule = `@extern(embed)

package custom

instance: {name: string, namespace: string}
values: {}
objects: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "\(instance.name)-cm"
	data: secret: _ @embed(file="../../secret.txt", type=text)
}
`
	// slowModule evaluates a cubic comprehension: about 10 s of CPU here, far past
	// the 2 s deadline the timeout test gives renders.
	slowModule = `package custom

import "list"

_n: list.Range(0, 200, 1)
instance: {name: string, namespace: string}
values: {}
objects: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "\(instance.name)-cm"
	data: n: "\(len([for a in _n for b in _n for c in _n if a+b+c < 0 {a}]))"
}
`
)

// secretText is a file at the root of the repository that no module may read.
const secretText = "cairn-secret-7f3a9c"

// moduleRepo is an app-module instance "good" (configs x) beside the instance "mod"
// of modules/custom.
func moduleRepo(e *env, good inst) map[string]string {
	files := appRepo("", good)
	files["modules/custom/main.cue"] = customModule
	files["instances/mod.yaml"] = localInstanceYAML("mod", e.ns, "./modules/custom", "{}")
	return files
}

// expectModLastGood checks that the failed instance mod keeps its ConfigMap and its
// last applied revision, and is Stalled.
func (e *env) expectModLastGood(rev string) {
	e.t.Helper()
	e.g.Expect(e.configMap(e.ns, "mod-cm")).NotTo(BeNil())
	mi := e.instance(e.ns, "mod")
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(rev))
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
}

// expectNowhere checks that s appears in no sync result, no status of the test's
// instances or the Platform, and no ConfigMap of the test's namespace.
func (e *env) expectNowhere(res *reconciler.SyncResult, s string) {
	e.t.Helper()
	e.g.Expect(fmt.Sprintf("%+v", res)).NotTo(ContainSubstring(s))
	var mis cairnv1.ModuleInstanceList
	e.g.Expect(e.c.List(e.ctx, &mis, client.InNamespace(e.ns))).To(Succeed())
	e.g.Expect(fmt.Sprintf("%+v", mis.Items)).NotTo(ContainSubstring(s))
	e.g.Expect(fmt.Sprintf("%+v", e.platformCR().Status)).NotTo(ContainSubstring(s))
	var cms corev1.ConfigMapList
	e.g.Expect(e.c.List(e.ctx, &cms, client.InNamespace(e.ns))).To(Succeed())
	e.g.Expect(fmt.Sprintf("%+v", cms.Items)).NotTo(ContainSubstring(s))
}

func TestBrokenModuleFailsAloneAndKeepsLastGood(t *testing.T) {
	tests := []struct {
		name, module, reason string
		contains             []string
	}{
		{"CUE syntax error", syntaxErrorModule, render.ReasonRenderFailed,
			[]string{"modules/custom/main.cue:5:", "missing ','"}},
		{"non-concrete output", notConcreteModule, render.ReasonNotConcrete,
			[]string{"modules/custom/main.cue:9:", "objects.cm.data.image: incomplete value string"}},
		{"output over the object cap", tenObjectsModule, render.ReasonLimitExceeded,
			[]string{"module renders 10 objects, more than MaxObjects (5)"}},
		{"@embed of a file outside the module", embedOutsideModule, render.ReasonUnsafeModule,
			[]string{"modules/custom/main.cue:11:", "cannot refer to parent directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.withRenderLimits(render.Limits{MaxObjects: 5})
			good := inst{name: "good", ns: e.ns, replicas: 0, configs: configs("x")}
			repo := newGitRepo(t, moduleRepo(e, good))
			rev := e.syncClean(repo)

			good.configs = configs("x", "y")
			repo.commit(tt.name, map[string]string{"modules/custom/main.cue": tt.module,
				"secret.txt": secretText, "instances/good.yaml": good.yaml()})
			res := e.sync(repo)
			e.expectFailure(res, wantFailure{name: "mod", reason: tt.reason, contains: tt.contains})
			e.g.Expect(result(res, e.ns, "good").Action).To(BeEquivalentTo("Updated"))
			e.g.Expect(result(res, e.ns, "good").Ready).To(BeTrue())
			e.g.Expect(e.configMap(e.ns, "good-y")).NotTo(BeNil())
			e.expectModLastGood(rev)
			e.expectNowhere(res, secretText)
		})
	}
}

func TestRenderTimeoutLeavesOtherInstancesConverging(t *testing.T) {
	e := newEnv(t)
	e.withRenderLimits(render.Limits{Timeout: 2 * time.Second})
	good := inst{name: "good", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, moduleRepo(e, good))
	rev := e.syncClean(repo)

	good.configs = configs("x", "y")
	repo.commit("a module that never ends", map[string]string{"modules/custom/main.cue": slowModule,
		"instances/good.yaml": good.yaml()})
	start := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
	e.expectFailure(res, wantFailure{name: "mod", reason: render.ReasonRenderTimeout,
		contains: []string{"failed to render {ns}/mod", "render exceeded its deadline (timeout 2s)"}})
	e.g.Expect(result(res, e.ns, "good").Ready).To(BeTrue(), "%+v", result(res, e.ns, "good"))
	e.g.Expect(e.configMap(e.ns, "good-y")).NotTo(BeNil())
	e.expectModLastGood(rev)
}

func TestRegistryDownIsTransient(t *testing.T) {
	e := newEnv(t)
	files := appRepo("  moduleRegistry: down\n")
	files["registries.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata:\n  name: down\nspec:\n  hostname: 127.0.0.1:1\n  plainHTTP: true\n"
	files["instances/r.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: r\n  namespace: " + e.ns +
		"\nspec:\n  module:\n    cue:\n      path: cairn.dev/examples/redis@v0\n      version: v0.1.0\n"
	res := e.sync(newGitRepo(t, files))
	r := result(res, e.ns, "r")
	e.g.Expect(r.Reason).To(Equal("FetchFailed"), "%+v", r)
	mi := e.instance(e.ns, "r")
	e.g.Expect(isTrue(mi, "Stalled")).To(BeFalse())
	e.g.Expect(isTrue(mi, "Reconciling")).To(BeTrue())
	e.g.Expect(mi.Status.NextRetryAt.Time).To(BeTemporally("<", time.Now().Add(time.Minute)))
}

func TestSourceFailureIsRecordedOnThePlatform(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns, replicas: 0}))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	bad := repo.commit("an LFS pointer", map[string]string{"assets/big.bin": "version https://git-lfs.github.com/spec/v1\n" +
		"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"})
	_, err := e.revision(repo)
	e.g.Expect(err).To(HaveOccurred())
	e.engine.RecordSourceFailure(e.ctx, bad, err)
	p := e.platformCR()
	e.g.Expect(isTrueCondition(p, "Ready")).To(BeFalse())
	e.g.Expect(p.Status.LastAttemptedRevision).To(Equal(bad))
	e.g.Expect(p.Status.LastSyncedRevision).NotTo(Equal(bad))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a")).NotTo(BeNil())
}
