package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// SplitYAML splits a multi-document YAML stream, dropping empty documents.
func SplitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// DecodeYAML decodes every document of a YAML stream into an object.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := SplitYAML(data)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for i, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i+1)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// ReadObjects decodes every *.yaml and *.yml file of dir (not its
// subdirectories), and orders the objects as they can be created: Namespaces
// first, then CRDs, then the rest in file order.
func ReadObjects(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		o, err := DecodeYAML(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		objs = append(objs, o...)
	}
	SortForCreation(objs)
	return objs, nil
}

// SortForCreation puts Namespaces first and CustomResourceDefinitions second,
// keeping the order of everything else.
func SortForCreation(objs []*unstructured.Unstructured) {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Kind: "Namespace"}:
			return 0
		case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
}

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
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return e.Dynamic.Resource(m.Resource).Namespace(ns), nil
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
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", Describe(obj), err)
		}
		return out, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.SetResourceVersion(old.GetResourceVersion())
		out, err = ri.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("updating %s: %w", Describe(obj), err)
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
	objs, err := DecodeYAML([]byte(data))
	if err != nil {
		return nil, err
	}
	SortForCreation(objs)
	return objs, e.ApplyAll(ctx, objs)
}

// Get reads obj's current state from the API server.
func (e *Env) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := e.Resource(obj)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
}

// Delete deletes obj; an object already gone is no error.
func (e *Env) Delete(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := e.Resource(obj)
	if err != nil {
		return err
	}
	err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", Describe(obj), err)
	}
	return nil
}

// DeleteAll deletes objects in reverse order.
func (e *Env) DeleteAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	var errs []error
	for _, o := range slices.Backward(objs) {
		errs = append(errs, e.Delete(ctx, o))
	}
	return errors.Join(errs...)
}

// Describe names an object for messages: Kind ns/name.
func Describe(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}
