// Command in-place adds the multicluster plugin to the cluster's own CoreDNS
// (kubeadm's layout by default) and takes it out again; usage says what it
// changes, and in which order. deploy/in-place.sh builds and runs it; the
// Jobs of deploy/in-place run it from the image with --image-of-pod.
// corefile.go edits the Corefile, install.go changes the cluster, rbac.go
// holds the plugin's rules; testdata/README.md says what the tests edit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const usage = `usage:
  in-place install --image IMAGE [flags]         add the multicluster plugin to the cluster's CoreDNS
  in-place install --image-of-pod POD [flags]    the same, with the image of POD's first container
  in-place uninstall [--force] [flags]           restore what install changed
  in-place corefile [--zone ZONE]                read a Corefile on stdin, print it edited on stdout

install, in this order: creates the ClusterRole coredns-multicluster-in-place
with the rules of deploy/rbac.yaml and a ClusterRoleBinding of that name to
the ServiceAccount of CoreDNS's Deployment (CoreDNS's own ClusterRole is not
touched); sets the CoreDNS container's image to IMAGE (CoreDNS built with the
plugin) and waits for the rollout; adds "multicluster ZONE" before the
kubernetes directive of the Corefile. The originals are kept in the ConfigMap
coredns-multicluster-in-place. Run again, install only sets the image and the
binding's ServiceAccount.

uninstall restores the Corefile and the image, in this order, then deletes the
ClusterRoleBinding, the ClusterRole and that ConfigMap. It refuses when the
Corefile or the image changed since install; --force restores them anyway.

The kubeconfig is read as kubectl reads it (KUBECONFIG, ~/.kube/config,
--kubeconfig, --context); without one, in a pod, the pod's ServiceAccount.

flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command; it returns the exit code: 0, 1 on an error, 2 on a
// refusal or a usage error.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "help"}, args[0]) {
		fs, code := newFlags("help", &options{}), 2
		fs.SetOutput(stderr)
		if len(args) > 0 {
			fs.SetOutput(stdout)
			code = 0
		}
		fs.Usage()
		return code
	}
	cmd, o := args[0], &options{out: stdout, errOut: stderr}
	fs := newFlags(cmd, o)
	fs.SetOutput(stderr)
	if !slices.Contains([]string{"install", "uninstall", "corefile"}, cmd) {
		fmt.Fprintf(stderr, "error: unknown command %q\n\n", cmd)
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if cmd == "install" && (o.image == "") == (o.imageOfPod == "") {
		fmt.Fprintln(stderr, "error: install needs one of --image IMAGE (CoreDNS built with the multicluster plugin) and --image-of-pod POD")
		return 2
	}
	if err := do(cmd, o, stdin); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		if isRefusal(err) {
			return 2
		}
		return 1
	}
	return 0
}

// newFlags are cmd's flags; those of help are all.
func newFlags(cmd string, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("in-place "+cmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.zone, "zone", "clusterset.local", "the zone the multicluster plugin serves")
	if cmd == "corefile" {
		return fs
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig file (default: as kubectl: $KUBECONFIG, ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context (default: its current context)")
	fs.StringVar(&o.namespace, "namespace", "kube-system", "the namespace of CoreDNS's ConfigMap and Deployment")
	fs.StringVar(&o.configMap, "configmap", "coredns", "CoreDNS's ConfigMap")
	fs.StringVar(&o.key, "key", "Corefile", "the ConfigMap's key that holds the Corefile")
	fs.StringVar(&o.deployment, "deployment", "coredns", "CoreDNS's Deployment")
	fs.StringVar(&o.container, "container", "coredns", "the Deployment's CoreDNS container")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would change, change nothing")
	fs.DurationVar(&o.wait, "wait", 5*time.Minute, "how long to wait for the Deployment's rollout before the next step; 0: do not wait")
	if cmd == "install" || cmd == "help" {
		fs.BoolVar(&o.waitAnswers, "wait-answers", false, "install: then wait until every ready CoreDNS pod answers the zone, asked at its pod address (in the cluster: the Job)")
		fs.StringVar(&o.image, "image", "", "CoreDNS built with the multicluster plugin (this or --image-of-pod)")
		fs.StringVar(&o.imageOfPod, "image-of-pod", "", "install the image of this pod's first container (a pod in --namespace)")
	}
	if cmd == "uninstall" || cmd == "help" {
		fs.BoolVar(&o.force, "force", false, "restore the originals even where someone changed them since install")
	}
	return fs
}

// do runs cmd with its flags parsed.
func do(cmd string, o *options, stdin io.Reader) error {
	if cmd == "corefile" {
		in, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		e, err := editCorefile(string(in), o.zone)
		if err != nil {
			return err
		}
		for _, n := range e.notes {
			fmt.Fprintf(o.errOut, "note: %s\n", n)
		}
		switch {
		case !e.changed:
			fmt.Fprintf(o.errOut, "note: server block %q already has multicluster %s (line %d): nothing to change\n", e.block, e.zone, e.line)
		case e.converted:
			fmt.Fprintf(o.errOut, "note: server block %q: moved %s from the kubernetes plugin's multicluster option to the multicluster plugin (line %d)\n", e.block, e.zone, e.line)
		}
		if !e.reload {
			fmt.Fprintf(o.errOut, "note: server block %q has no reload plugin: restart CoreDNS after changing its Corefile\n", e.block)
		}
		fmt.Fprint(o.out, e.out)
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "coredns-multicluster-in-place"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cmd == "install" {
		return install(ctx, c, o)
	}
	return uninstall(ctx, c, o)
}
