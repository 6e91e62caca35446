package cache

import (
	"fmt"
	"net/netip"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"
)

// Static holds answers built once from API objects, through the same
// conversion and building as the Controller. It serves tests and benchmarks
// that must not depend on informers.
type Static struct {
	idx    *index
	Synced bool
	serial uint32
}

// NewStatic builds the answers of the given ServiceImports (v1alpha2,
// v1beta1 or v1alpha1; a v1alpha2 view with data wins) and EndpointSlices.
func NewStatic(zones []string, ttl uint32, objs ...runtime.Object) (*Static, error) {
	imports := map[string]*Import{}
	bySvc := map[string][]*Slice{}
	for _, o := range objs {
		switch v := o.(type) {
		case *v1alpha2.ServiceImport, *mcsv1beta1.ServiceImport, *mcsv1alpha1.ServiceImport:
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
			if err != nil {
				return nil, err
			}
			u := &unstructured.Unstructured{Object: m}
			var im *Import
			switch v.(type) {
			case *v1alpha2.ServiceImport:
				im = importFromRoot(u, V1alpha2)
			case *mcsv1beta1.ServiceImport:
				im = importFromSpec(u, V1beta1)
			default:
				im = importFromSpec(u, V1alpha1)
			}
			k := key(im.Namespace, im.Name)
			if old := imports[k]; old == nil || !old.HasData || (im.HasData && im.Version() == V1alpha2) {
				imports[k] = im
			}
		case *discoveryv1.EndpointSlice:
			if v.Labels[LabelServiceName] == "" {
				continue // not a multi-cluster slice: the Controller never lists it
			}
			s := sliceFrom(v)
			if s.Service != "" {
				bySvc[key(s.Namespace, s.Service)] = append(bySvc[key(s.Namespace, s.Service)], s)
			}
		default:
			return nil, fmt.Errorf("unexpected object %T", o)
		}
	}
	st := &Static{idx: newIndex(true), Synced: true, serial: 1}
	for k, im := range imports {
		if !im.HasData {
			continue
		}
		if n, ok := normalize(im, bySvc[k]); ok {
			st.idx.put(k, build(im, n, zones, ttl))
		}
	}
	return st, nil
}

// HasSynced reports the Synced field.
func (s *Static) HasSynced() bool { return s.Synced }

// Lookup returns the answers of the service "<name>.<namespace>", or nil.
func (s *Static) Lookup(k string) *Service { return s.idx.get(k) }

// LookupIP returns the services whose ClusterSetIPs hold ip.
func (s *Static) LookupIP(ip netip.Addr) []*Service { return s.idx.lookupIP(ip) }

// HasNamespace reports whether any service of the namespace has answers.
func (s *Static) HasNamespace(ns string) bool { return s.idx.hasNamespace(ns) }

// Serial is always 1.
func (s *Static) Serial() uint32 { return s.serial }

// Each calls f for every service until f returns false.
func (s *Static) Each(f func(*Service) bool) { s.idx.each(f) }
