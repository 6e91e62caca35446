package harness

import (
	"github.com/clustersetdns/multicluster/internal/contract"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// PluginUser is the user name the plugin's CoreDNS authenticates as.
const PluginUser = "coredns-multicluster"

// Identity is a user of the API server with its own credentials.
type Identity struct {
	Name string
	// Kubeconfig is the path of a kubeconfig file holding its credentials,
	// whose one context envtest names "envtest".
	Kubeconfig string
	Config     *rest.Config
	Clientset  kubernetes.Interface
}

// PluginIdentity provisions PluginUser, binds it to the ClusterRole that
// deploy/rbac.yaml grants the plugin (read from the file, so the test follows
// the deployed permissions) and nothing else, and writes its kubeconfig.
func (e *Env) PluginIdentity(ctx context.Context) (*Identity, error) {
	role, err := ClusterRoleFromFile(filepath.Join(e.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		return nil, err
	}
	return e.Identity(ctx, PluginUser, role)
}

// Identity provisions a user (client certificate, no groups beyond
// system:authenticated), applies role and binds it to the user.
func (e *Env) Identity(ctx context.Context, name string, role *rbacv1.ClusterRole) (*Identity, error) {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	for kind, obj := range map[string]any{"ClusterRole": role, "ClusterRoleBinding": binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
		if _, err := e.Apply(ctx, u); err != nil {
			return nil, err
		}
	}
	user, err := e.testEnv.AddUser(envtest.User{Name: name}, &rest.Config{QPS: 50, Burst: 100})
	if err != nil {
		return nil, fmt.Errorf("provisioning user %s: %w", name, err)
	}
	id := &Identity{Name: name, Kubeconfig: filepath.Join(e.tmp, name+".kubeconfig"), Config: user.Config()}
	id.Clientset = kubernetes.NewForConfigOrDie(id.Config)
	kubeconfig, err := user.KubeConfig()
	if err == nil {
		err = os.WriteFile(id.Kubeconfig, kubeconfig, 0o600)
	}
	if err != nil {
		return nil, err
	}
	// RBAC caches are filled from watches: wait until the binding is in force.
	granted := role.Rules[0]
	attrs := authorizationv1.ResourceAttributes{Verb: granted.Verbs[0], Group: granted.APIGroups[0], Resource: granted.Resources[0]}
	return id, poll(ctx, 100*time.Millisecond, func() error {
		if ok, err := id.Can(ctx, attrs); err != nil || ok {
			return err
		}
		return fmt.Errorf("%s may not yet %s %s", name, attrs.Verb, attrs.Resource)
	})
}

// Can asks the API server, as this identity, whether it may do attrs.
func (id *Identity) Can(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	review, err := id.Clientset.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// ClusterRoleFromFile returns the first ClusterRole in a multi-document YAML file.
func ClusterRoleFromFile(path string) (*rbacv1.ClusterRole, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := contract.DecodeYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, o := range objs {
		if o.GroupVersionKind() != rbacv1.SchemeGroupVersion.WithKind("ClusterRole") {
			continue
		}
		role := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, role, true); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if r := role.Rules; len(r) == 0 || len(r[0].Verbs) == 0 || len(r[0].Resources) == 0 || len(r[0].APIGroups) == 0 {
			return nil, fmt.Errorf("%s: ClusterRole %s grants nothing", path, role.Name)
		}
		return role, nil
	}
	return nil, fmt.Errorf("%s holds no ClusterRole", path)
}
