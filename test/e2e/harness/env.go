package harness

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

func init() {
	// envtest logs through controller-runtime's logger; errors it logs are
	// also returned, so silence it rather than have it complain it is unset.
	logf.SetLogger(logr.Discard())
}

// Options say how to start the control plane. The zero value installs the
// CRDs of <repo>/deploy/crds.
type Options struct {
	// Repo is the plugin's checkout; RepoRoot() when empty.
	Repo string
	// BinDir holds kube-apiserver, etcd and kubectl; <repo>/.cache/bin when
	// empty (hack/realenv/build.sh fills it). KUBEBUILDER_ASSETS wins over both.
	BinDir string
	// CRDDirectoryPaths are read for CRDs; [<repo>/deploy/crds] when both
	// this and CRDs are empty.
	CRDDirectoryPaths []string
	// CRDs are installed as well, for tests that need a changed CRD.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Output receives etcd's and kube-apiserver's output; discarded when nil.
	Output io.Writer
	// Audit makes kube-apiserver write an audit log of every request, at
	// the Metadata level (who, what, when), for AuditEvents to read.
	Audit bool
	// APIServerFlags are more kube-apiserver flags, name (without "--") to
	// value, e.g. max-requests-inflight for a test of throttling.
	APIServerFlags map[string]string
}

// Env is a running etcd and kube-apiserver, listening on 127.0.0.1 only, with
// RBAC authorization, and admin clients for it.
type Env struct {
	Repo   string
	BinDir string

	// Config, Dynamic, Clientset and Mapper act as a system:masters admin.
	Config    *rest.Config
	Dynamic   dynamic.Interface
	Clientset kubernetes.Interface
	Mapper    *restmapper.DeferredDiscoveryRESTMapper

	// CRDs are the CRDs installed at start.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// EtcdURL is etcd's client URL (plain HTTP, no authentication).
	EtcdURL string

	testEnv  *envtest.Environment
	tmp      string
	auditLog string
	apiPort  int        // kube-apiserver's secure port
	out      io.Writer  // where etcd's and kube-apiserver's output goes
	again    []*process // processes Kill restarted
}

// Start starts etcd and kube-apiserver and installs the CRDs. Stop it.
func Start(opts Options) (*Env, error) {
	repo, bin, err := opts.locations()
	if err != nil {
		return nil, err
	}
	crdPaths := opts.CRDDirectoryPaths
	if len(crdPaths) == 0 && len(opts.CRDs) == 0 {
		crdPaths = []string{filepath.Join(repo, "deploy", "crds")}
	}

	// Every listener on 127.0.0.1, chosen here rather than looked up as "localhost".
	var ports [3]int // etcd clients, etcd peers, kube-apiserver
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, err
		}
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]

	tmp, err := os.MkdirTemp("", "e2e-env-")
	if err != nil {
		return nil, err
	}
	e := &Env{Repo: repo, BinDir: bin, tmp: tmp, EtcdURL: fmt.Sprintf("http://127.0.0.1:%d", etcdPort), apiPort: apiPort}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        crdPaths,
		CRDs:                     opts.CRDs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	te.CRDInstallOptions.MaxTime = 60 * time.Second
	api := te.ControlPlane.GetAPIServer()
	api.SecureServing.Address = "127.0.0.1"
	api.SecureServing.Port = strconv.Itoa(apiPort)
	if err := e.configure(api, opts); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	etcd := &envtest.Etcd{URL: &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))}}
	etcd.Configure().Set("listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	te.ControlPlane.Etcd = etcd
	// Their output goes to opts.Output, and its tail into the error should
	// they fail to start.
	tail := &buffer{max: 32 << 10}
	var out io.Writer = tail
	if opts.Output != nil {
		out = io.MultiWriter(tail, opts.Output)
	}
	api.Out, api.Err = prefixed{out, "kube-apiserver: "}, prefixed{out, "kube-apiserver: "}
	e.out = out
	etcd.Out, etcd.Err = prefixed{out, "etcd: "}, prefixed{out, "etcd: "}

	e.testEnv = te
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w\n--- their output's end\n%s", bin, err, tail)
	}
	e.CRDs = te.CRDs
	e.connect(cfg)
	return e, nil
}

// locations are the repository and the directory of the binaries.
func (opts Options) locations() (repo, bin string, err error) {
	if repo = opts.Repo; repo == "" {
		if repo, err = RepoRoot(); err != nil {
			return "", "", err
		}
	}
	bin = cmp.Or(opts.BinDir, filepath.Join(repo, ".cache", "bin"))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		for _, name := range []string{"etcd", "kube-apiserver"} {
			if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
				return "", "", fmt.Errorf("%s is missing in %s: run hack/realenv/build.sh first", name, bin)
			}
		}
	}
	return repo, bin, nil
}

// configure sets kube-apiserver's flags: RBAC, no endpoint reconciler, and
// what opts ask for, the audit log among them.
func (e *Env) configure(api *envtest.APIServer, opts Options) error {
	api.Configure().
		Set("authorization-mode", "RBAC").
		// The address published in the kubernetes Service's endpoints.
		// Loopback is refused there unless nothing publishes them.
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	for name, value := range opts.APIServerFlags {
		api.Configure().Set(name, value)
	}
	if !opts.Audit {
		return nil
	}
	policy := filepath.Join(e.tmp, "audit-policy.yaml")
	e.auditLog = filepath.Join(e.tmp, "audit.log")
	const everything = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	if err := os.WriteFile(policy, []byte(everything), 0o600); err != nil {
		return err
	}
	api.Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", e.auditLog).
		Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking")
	return nil
}

// connect makes the admin clients of a started envtest's cfg, never invalid.
func (e *Env) connect(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = 200, 400
	e.Config = cfg
	e.Dynamic = dynamic.NewForConfigOrDie(cfg)
	e.Clientset = kubernetes.NewForConfigOrDie(cfg)
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
}

// Connect is an Env for a cluster that runs already (hack/cluster.sh up):
// admin clients from kubeconfig, and AuditEvents from auditLog when not
// empty. Stop leaves the cluster running.
func Connect(kubeconfig, auditLog string) (*Env, error) {
	repo, bin, err := Options{}.locations()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	e := &Env{Repo: repo, BinDir: bin, auditLog: auditLog}
	e.connect(cfg)
	return e, nil
}

// Stop stops kube-apiserver and etcd and removes their files.
func (e *Env) Stop() error {
	if e == nil || e.testEnv == nil {
		return nil
	}
	// kube-apiserver before etcd, which it needs to shut down in time.
	var errs []error
	for _, etcd := range []bool{false, true} {
		for _, p := range e.again {
			if (filepath.Base(p.cmd.Path) == "etcd") == etcd {
				errs = append(errs, p.stop(30*time.Second))
			}
		}
		if !etcd {
			errs = append(errs, e.testEnv.Stop())
		}
	}
	e.testEnv = nil
	return errors.Join(append(errs, os.RemoveAll(e.tmp))...)
}

// APIServerURL is where kube-apiserver listens.
func (e *Env) APIServerURL() string { return e.Config.Host }

// KubectlPath is the kubectl built next to kube-apiserver.
func (e *Env) KubectlPath() string { return filepath.Join(e.BinDir, "kubectl") }

// WriteAdminKubeconfig writes a kubeconfig for the admin to path.
func (e *Env) WriteAdminKubeconfig(path string) error {
	return os.WriteFile(path, e.testEnv.KubeConfig, 0o600)
}

// TempDir is a directory removed by Stop.
func (e *Env) TempDir() string { return e.tmp }

// Context returns a context bounded by d, for API calls from tests.
func Context(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// handedOut are the ports FreePort returned: never twice, as the kernel may
// give a port just freed to the next listener (one CoreDNS's ready and metrics).
var handedOut sync.Map // port -> true

// FreePort returns a port on 127.0.0.1 free for both UDP and TCP a moment
// ago and not returned before.
func FreePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
	return 0, errors.New("found no port free for both UDP and TCP on 127.0.0.1")
}

// buffer is an output buffer safe for concurrent writes; with max > 0 it
// keeps only the last max bytes.
type buffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; t.max > 0 && over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// prefixed prefixes every line written to Writer; klog and etcd write whole
// lines.
type prefixed struct {
	io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	var buf bytes.Buffer
	for line := range bytes.Lines(b) {
		buf.WriteString(p.prefix)
		buf.Write(line)
	}
	if _, err := p.Writer.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}
