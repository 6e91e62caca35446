package cache

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"
)

// Static holds answers built once from API objects, through the same
// conversion and building as the Controller. It serves tests, benchmarks
// and hack/run.sh's snapshot server, which must not depend on informers.
type Static struct {
	idx    *index
	Synced bool
	serial uint32
}

// NewStatic builds the answers of the given ServiceImports (v1alpha2,
// v1beta1 or v1alpha1, typed or unstructured; a v1alpha2 view with data
// wins) and EndpointSlices. Unstructured Namespaces are skipped, so the
// objects of a YAML file such as testdata/'s can be passed as they are read.
func NewStatic(zones []string, ttl uint32, objs ...runtime.Object) (*Static, error) {
	return Config{Zones: zones, TTL: ttl}.Static(objs...)
}

// Static builds the answers of the given objects as NewStatic does, in
// cfg's zones with its TTL, with cfg.ClusterID as the local cluster.
func (cfg Config) Static(objs ...runtime.Object) (*Static, error) {
	zones, ttl := cfg.Zones, cfg.TTL
	imports := map[string]*Import{}
	bySvc := map[string][]*Slice{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return nil, err
			}
			u = &unstructured.Unstructured{Object: m}
			u.SetGroupVersionKind(gvkOf(o))
		}
		gvk := u.GroupVersionKind()
		switch {
		case gvk.Group == mcsv1beta1.GroupName && gvk.Kind == "ServiceImport":
			im, err := ReadImport(u)
			if err != nil {
				return nil, err
			}
			k := key(im.Namespace, im.Name)
			if old := imports[k]; old == nil || !old.HasData || (im.HasData && im.Version() == V1alpha2) {
				imports[k] = im
			}
		case gvk == discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"):
			if u.GetLabels()[LabelServiceName] == "" {
				continue // not a multi-cluster slice: the Controller never lists it
			}
			var es discoveryv1.EndpointSlice
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &es); err != nil {
				return nil, fmt.Errorf("EndpointSlice %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			s := sliceFrom(&es, nil)
			if s.Service != "" {
				bySvc[key(s.Namespace, s.Service)] = append(bySvc[key(s.Namespace, s.Service)], s)
			}
		case gvk == corev1.SchemeGroupVersion.WithKind("Namespace"):
		default:
			return nil, fmt.Errorf("unexpected object %T %v", o, gvk)
		}
	}
	st := &Static{idx: newIndex(true, true), Synced: true, serial: 1}
	for k, im := range imports {
		if !im.HasData {
			continue
		}
		fit, _ := fitNames(im, bySvc[k], zones)
		if n, ok := normalize(im, fit, cfg.localFor(im, cfg.ClusterID), cfg.LocalZone, nil); ok {
			st.idx.put(k, build(im, n, zones, ttl, SelectByCluster|SelectByZone))
		}
	}
	return st, nil
}

// ReadImport reads a ServiceImport of one of Versions as the Controller
// does: through its version's Go types, dropping what it cannot answer.
func ReadImport(u *unstructured.Unstructured) (*Import, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	im, err := readJSON(u.GroupVersionKind().Version, data)
	if err != nil {
		return nil, fmt.Errorf("ServiceImport %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return im, nil
}

// HasSynced reports the Synced field.
func (s *Static) HasSynced() bool { return s.Synced }

// Lookup returns the answers of the service "<name>.<namespace>", or nil.
func (s *Static) Lookup(k string) *Service { return s.idx.get(k) }

// LookupIP returns the services named at ip in reverse zones: those whose
// ClusterSetIPs hold it, and headless ones with a ready endpoint at it.
func (s *Static) LookupIP(ip netip.Addr) []*Service { return s.idx.lookupIP(ip) }

// HasNamespace reports whether any service of the namespace has answers.
func (s *Static) HasNamespace(ns string) bool { return s.idx.hasNamespace(ns) }

// Serial is always 1.
func (s *Static) Serial() uint32 { return s.serial }

// Each calls f for every service until f returns false.
func (s *Static) Each(f func(*Service) bool) { s.idx.each(f) }

// gvkOf names the kind of a typed object NewStatic takes; the typed objects
// of tests carry no TypeMeta.
func gvkOf(o runtime.Object) schema.GroupVersionKind {
	switch o.(type) {
	case *v1alpha2.ServiceImport:
		return v1alpha2.SchemeGroupVersion.WithKind("ServiceImport")
	case *mcsv1beta1.ServiceImport:
		return mcsv1beta1.SchemeGroupVersion.WithKind("ServiceImport")
	case *mcsv1alpha1.ServiceImport:
		return mcsv1alpha1.SchemeGroupVersion.WithKind("ServiceImport")
	case *discoveryv1.EndpointSlice:
		return discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	}
	return o.GetObjectKind().GroupVersionKind()
}
