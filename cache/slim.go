package cache

import (
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Labels that tie an EndpointSlice to an imported service (KEP-1645), as
// sigs.k8s.io/mcs-api defines them.
const (
	LabelServiceName   = mcsv1beta1.LabelServiceName
	LabelSourceCluster = mcsv1beta1.LabelSourceCluster
)

// ServiceImportResource is the ServiceImport resource, named by
// sigs.k8s.io/mcs-api's constants: the one spelling of its group and
// resource for the plugin, its tests and the bench.
var ServiceImportResource = schema.GroupResource{Group: mcsv1beta1.GroupName, Resource: mcsv1beta1.ServiceImportPluralName}

// ServiceImports is the ServiceImport resource in version.
func ServiceImports(version string) schema.GroupVersionResource {
	return ServiceImportResource.WithVersion(version)
}

// Versions of ServiceImport the cache reads. v1beta1 and v1alpha1 share one
// schema, with the fields under spec and status (sigs.k8s.io/mcs-api);
// v1alpha2 has them at the object's root.
const (
	V1alpha2 = "v1alpha2"
	V1beta1  = "v1beta1"
	V1alpha1 = "v1alpha1"
)

// Versions are the ServiceImport versions the cache knows, in the order their
// metrics are listed.
var Versions = []string{V1alpha2, V1beta1, V1alpha1}

// Import is the slim copy kept for one view (one API version) of a
// ServiceImport. A view that the API server pruned to nothing has HasData false.
// A hundred thousand of them are held, so its fields are packed: 112 bytes.
type Import struct {
	Meta
	IPs      []netip.Addr // at most one per family, in the object's order
	Ports    []Port       // named, valid, without duplicates; shared by imports with the same list
	extra    *importExtra // what few imports have; nil, mostly
	version  uint8        // 1 + the version's index in Versions; 0 for none
	HasData  bool
	Headless bool
	// PreferClose: the import's trafficDistribution asks for close
	// endpoints first (prefersClose), which for a headless service means
	// the local cluster's.
	PreferClose bool
}

// blankImport makes the import of an object read through version.
func blankImport(meta Meta, version string) *Import {
	im := &Import{Meta: meta}
	im.setVersion(version)
	return im
}

// Version is the API version the import was read through.
func (im *Import) Version() string {
	if im.version == 0 || int(im.version) > len(Versions) {
		return ""
	}
	return Versions[im.version-1]
}

// setVersion imports that im was read through version, one of Versions.
func (im *Import) setVersion(version string) {
	for i, v := range Versions {
		if v == version {
			im.version = uint8(i + 1)
		}
	}
}

// importExtra is what only some imports carry, kept behind one pointer so
// that the others pay 8 bytes for it.
type importExtra struct {
	problems []string // what was dropped from the object, for logs and metrics
	// clusters are the clusters a headless import lists (status.clusters, or
	// clusters in the root shape), sorted, interned: the only source
	// clusters whose EndpointSlices answer it. Empty: any cluster's.
	clusters []string
}

func (im *Import) more() *importExtra {
	if im.extra == nil {
		im.extra = &importExtra{}
	}
	return im.extra
}

// Problems are what was dropped from the object, for logs and metrics.
func (im *Import) Problems() []string {
	if im.extra == nil {
		return nil
	}
	return im.extra.problems
}

// refused reports whether the object holds data that is not used: a type
// that is none of the two, a name that is not a DNS label, or fields that do
// not decode. Its views agree on it as on an import with data, which is
// answered by nothing, so that it is not taken for an object whose data was
// lost.
func (im *Import) refused() bool {
	return !im.HasData && slices.ContainsFunc(im.Problems(), func(p string) bool {
		return p == ReasonBadType || p == ReasonBadServiceName || p == ReasonDecode
	})
}

// addProblem notes reason once, however many of the object's entries
// have it: a write is logged and counted once per reason.
func (im *Import) addProblem(reason string) {
	if !slices.Contains(im.Problems(), reason) {
		im.more().problems = append(im.more().problems, reason)
	}
}

// Clusters are the source clusters a headless import lists, sorted; none
// when it lists none (any cluster's EndpointSlices answer it) or is a
// ClusterSetIP import. Never modify them.
func (im *Import) Clusters() []string {
	if im.extra == nil {
		return nil
	}
	return im.extra.clusters
}

// lists reports whether a headless import's EndpointSlices of cluster may
// answer it: it lists no clusters, or lists this one.
func (im *Import) lists(cluster string) bool {
	cs := im.Clusters()
	if len(cs) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(cs, cluster)
	return ok
}

// Port is one named port of a service.
type Port struct {
	Name  string // a DNS label
	Proto string // "tcp", "udp" or "sctp"
	Port  uint16
}

// Sub is the port's name relative to its service, "_<name>._<proto>", the
// owner of its SRV imports.
func (p Port) Sub() string { return "_" + p.Name + "._" + p.Proto }

// Slice is the slim copy of one multi-cluster EndpointSlice.
type Slice struct {
	Meta
	Service   string
	Cluster   string     // lower-case RFC 1123 subdomain; empty when unusable
	Endpoints []Endpoint // ready endpoints only
	Problems  []string
}

// addProblem notes reason once, as Import's does.
func (s *Slice) addProblem(reason string) {
	if !slices.Contains(s.Problems, reason) {
		s.Problems = append(s.Problems, reason)
	}
}

// Endpoint is one ready endpoint: its DNS label (hostname, or the IP with
// separators turned into '-'), its zone and its addresses.
type Endpoint struct {
	Host  string
	Zone  string // the endpoint's topology zone, lower-case; "" when it has none
	Addrs []netip.Addr
}

// Meta is the metadata a slim copy keeps: a full metav1.ObjectMeta is over
// 200 bytes, most of a ClusterSetIP import's import.
type Meta struct {
	Namespace       string
	Name            string
	ResourceVersion string
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, through which informer
// stores find a import's key. It is called when a import is stored, never
// when a query is answered.
func (m *Meta) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion}
}

// objectKey is the object's key as client-go's stores have it,
// "<namespace>/<name>": the EndpointSlice informer's.
func (m *Meta) objectKey() string { return m.Namespace + "/" + m.Name }

// key returns the index key of a service: "<name>.<namespace>", the exact
// substring of a query name, so lookups need no allocation.
func key(namespace, name string) string { return name + "." + namespace }

// The slim copies live in informer stores, which key them by their metadata.
// They are never modified once made, so a deep copy is the import itself.

// GetObjectKind implements runtime.Object.
func (*Import) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (im *Import) DeepCopyObject() runtime.Object { return im }

// GetObjectKind implements runtime.Object.
func (*Slice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *Slice) DeepCopyObject() runtime.Object { return s }
