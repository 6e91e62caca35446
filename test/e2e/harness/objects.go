package harness

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/clustersetdns/multicluster/internal/contract"
)

// Resource returns the dynamic client for obj's kind, in obj's namespace when
// the kind is namespaced.
func (e *Env) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A CRD installed since discovery was cached.
		e.Mapper.Reset()
		m, err = e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.Dynamic.Resource(m.Resource).Namespace(cmp.Or(obj.GetNamespace(), metav1.NamespaceDefault)), nil
	}
	return e.Dynamic.Resource(m.Resource), nil
}

// Apply creates obj, or replaces the stored object with it when one exists
// (a full update: fields missing from obj go away). It returns the stored object.
func (e *Env) Apply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := e.Resource(obj)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	obj.SetResourceVersion("")
	out, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			old, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj.SetResourceVersion(old.GetResourceVersion())
			out, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("applying %s: %w", contract.Describe(obj), err)
	}
	return out, nil
}

// ApplyAll applies objects in order.
func (e *Env) ApplyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if _, err := e.Apply(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// ApplyYAML decodes a YAML stream and applies its objects in creation order.
func (e *Env) ApplyYAML(ctx context.Context, data string) ([]*unstructured.Unstructured, error) {
	objs, err := contract.DecodeYAML([]byte(data))
	if err != nil {
		return nil, err
	}
	contract.SortForCreation(objs)
	return objs, e.ApplyAll(ctx, objs)
}

// Delete deletes obj; an object already gone is no error.
func (e *Env) Delete(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := e.Resource(obj)
	if err != nil {
		return err
	}
	err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", contract.Describe(obj), err)
	}
	return nil
}
