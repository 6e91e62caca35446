package cache

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"
)

// ServiceImports are read as the Go types of their versions: mcs-api's for
// v1beta1 and v1alpha1, the project's (apis/v1alpha2) for v1alpha2. The JSON
// of the API server decodes straight into them, as a generated clientset's
// would, at a third of the time and memory of unstructured maps
// (BenchmarkDecodeImports).
//
// Unlike a generated clientset, each object decodes on its own: one that
// does not fit its version's type (a field of another JSON type, which only
// a CRD of another schema lets through) becomes a import with the
// decode_error problem, and the list or watch event that held it still
// delivers every other object. A generated client would fail the whole list,
// and the view with it.

// decoded is one ServiceImport as a view reads it: the typed object of its
// version, or, when the object does not fit that type, its metadata and why.
type decoded[T any, P typedImport[T]] struct {
	metav1.TypeMeta
	Object P                 // nil when the object did not decode
	Meta   metav1.ObjectMeta // the metadata of an object that did not decode
	Err    error
}

// typedImport is the pointer to a version's Go type of ServiceImport.
type typedImport[T any] interface {
	*T
	metav1.Object
	runtime.Object
}

// UnmarshalJSON decodes b into the version's type; when that fails, only
// the metadata, which names the object in the store and the logs. An object
// whose metadata does not decode fails the list, as with any client.
func (d *decoded[T, P]) UnmarshalJSON(b []byte) error {
	obj := P(new(T))
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, obj)
	if err == nil {
		d.Object = obj
		return nil
	}
	var m metav1.PartialObjectMetadata
	if merr := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &m); merr != nil {
		return merr
	}
	d.Meta, d.Err = m.ObjectMeta, err
	return nil
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, through which the
// reflector reads resourceVersions and bookmarks.
func (d *decoded[T, P]) GetObjectMeta() metav1.Object {
	if d.Object != nil {
		return d.Object
	}
	return &d.Meta
}

// DeepCopyObject implements runtime.Object.
func (d *decoded[T, P]) DeepCopyObject() runtime.Object {
	c := &decoded[T, P]{TypeMeta: d.TypeMeta, Err: d.Err}
	d.Meta.DeepCopyInto(&c.Meta)
	if d.Object != nil {
		c.Object = d.Object.DeepCopyObject().(P)
	}
	return c
}

// decodedList is a list of ServiceImports as a view reads it.
type decodedList[T any, P typedImport[T]] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []decoded[T, P] `json:"items"`
}

// UnmarshalJSON decodes the list as a generated client would, in one pass;
// only when an object does not fit T, once more, each object on its own.
func (l *decodedList[T, P]) UnmarshalJSON(b []byte) error {
	var typed listOf[T]
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &typed); err == nil {
		l.TypeMeta, l.ListMeta = typed.TypeMeta, typed.ListMeta
		l.Items = make([]decoded[T, P], len(typed.Items))
		for i := range typed.Items {
			l.Items[i].Object = &typed.Items[i]
		}
		return nil
	}
	var each listOf[decoded[T, P]]
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &each); err != nil {
		return err
	}
	l.TypeMeta, l.ListMeta, l.Items = each.TypeMeta, each.ListMeta, each.Items
	return nil
}

// listOf is the JSON of a list of E.
type listOf[E any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []E `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *decodedList[T, P]) DeepCopyObject() runtime.Object {
	c := &decodedList[T, P]{TypeMeta: l.TypeMeta, Items: make([]decoded[T, P], len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*decoded[T, P])
	}
	return c
}

// typedVersion is how one version of ServiceImport is decoded and read.
type typedVersion struct {
	gv     schema.GroupVersion
	codecs runtime.NegotiatedSerializer
	// watchCodecs decode watch events as codecs do, in fewer passes over
	// the JSON (watchSerializer).
	watchCodecs runtime.NegotiatedSerializer
	// example is an object of the type the version's watch delivers.
	example runtime.Object
	// read makes the import of obj, a decoded object of the version,
	// without the addresses addressProblem refuses (deny among them); false
	// when obj is of another type.
	read func(obj any, deny []netip.Prefix) (*Import, bool)
}

// typedVersions are the versions of Versions, as they decode.
var typedVersions = map[string]*typedVersion{
	V1alpha2: newTypedVersion(V1alpha2, func(si *v1alpha2.ServiceImport) rawImport {
		ports := make([]rawPort, len(si.Ports))
		for i, p := range si.Ports {
			ports[i] = rawPort{p.Name, p.Protocol, int64(p.Port)}
		}
		clusters := make([]string, len(si.Clusters))
		for i, c := range si.Clusters {
			clusters[i] = c.Cluster
		}
		return rawImport{string(si.Type), si.IPs, ports, si.TrafficDistribution, clusters, false}
	}),
	V1beta1: newTypedVersion(V1beta1, func(si *mcsv1beta1.ServiceImport) rawImport {
		ports := make([]rawPort, len(si.Spec.Ports))
		for i, p := range si.Spec.Ports {
			ports[i] = rawPort{p.Name, p.Protocol, int64(p.Port)}
		}
		clusters := make([]string, len(si.Status.Clusters))
		for i, c := range si.Status.Clusters {
			clusters[i] = c.Cluster
		}
		return rawImport{string(si.Spec.Type), si.Spec.IPs, ports, si.Spec.TrafficDistribution, clusters,
			si.Status.EndpointSliceObjects == mcsv1beta1.EndpointSliceObjectsAbsent}
	}),
	V1alpha1: newTypedVersion(V1alpha1, func(si *mcsv1alpha1.ServiceImport) rawImport {
		ports := make([]rawPort, len(si.Spec.Ports))
		for i, p := range si.Spec.Ports {
			ports[i] = rawPort{p.Name, p.Protocol, int64(p.Port)}
		}
		clusters := make([]string, len(si.Status.Clusters))
		for i, c := range si.Status.Clusters {
			clusters[i] = c.Cluster
		}
		return rawImport{string(si.Spec.Type), si.Spec.IPs, ports, si.Spec.TrafficDistribution, clusters,
			si.Status.EndpointSliceObjects == mcsv1alpha1.EndpointSliceObjectsAbsent}
	}),
}

// newTypedVersion registers the version's decoded types in a scheme of their
// own, with the meta types a watch and an error response carry; fields
// returns the fields of an object of the version that answers are made from.
func newTypedVersion[T any, P typedImport[T]](version string, fields func(P) rawImport) *typedVersion {
	gv := ServiceImports(version).GroupVersion()
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(gv.WithKind("ServiceImport"), &decoded[T, P]{})
	s.AddKnownTypeWithName(gv.WithKind("ServiceImportList"), &decodedList[T, P]{})
	metav1.AddToGroupVersion(s, gv)
	codecs := serializer.NewCodecFactory(s).WithoutConversion()
	return &typedVersion{
		gv:          gv,
		codecs:      codecs,
		watchCodecs: newWatchSerializer[T, P](codecs, gv),
		example:     &decoded[T, P]{},
		read: func(obj any, deny []netip.Prefix) (*Import, bool) {
			d, ok := obj.(*decoded[T, P])
			if !ok {
				return nil, false
			}
			if d.Object == nil {
				im := newImport(&d.Meta, version)
				im.addProblem(ReasonDecode)
				return im, true
			}
			im := newImport(d.Object, version)
			readShared(im, fields(d.Object), deny)
			return im, true
		},
	}
}

// decode decodes the JSON of one ServiceImport or a list of them, of the
// version: what the version's REST client does with a response.
func (tv *typedVersion) decode(data []byte) (runtime.Object, error) {
	info, ok := runtime.SerializerInfoForMediaType(tv.codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("no JSON serializer for ServiceImport %s", tv.gv.Version)
	}
	obj, _, err := tv.codecs.DecoderToVersion(info.Serializer, tv.gv).Decode(data, nil, nil)
	return obj, err
}

// watchSerializer is codecs for a watch of the version's ServiceImports. A
// watch delivers one event per object, which client-go decodes in two steps
// (rest.Request.Watch): the event, {"type", "object"}, with the object left
// as raw JSON, then the object. With codecs each step first reads the whole
// JSON for its apiVersion and kind, and a ServiceImport is then decoded
// twice more (decoded's UnmarshalJSON): a dozen passes over each object's
// bytes, which at 100,000 imports was most of the plugin's start. Here the
// event decodes into metav1.WatchEvent directly, and the object straight
// into the version's type; what is not a ServiceImport of the version (an
// ERROR event's Status, an object that does not fit the type) goes to
// codecs, as before.
type watchSerializer struct {
	runtime.NegotiatedSerializer // codecs
	infos                        []runtime.SerializerInfo
}

// newWatchSerializer is codecs with the decoders of JSON replaced.
func newWatchSerializer[T any, P typedImport[T]](codecs runtime.NegotiatedSerializer, gv schema.GroupVersion) watchSerializer {
	infos := slices.Clone(codecs.SupportedMediaTypes())
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeJSON || info.StreamSerializer == nil {
			continue
		}
		stream := *info.StreamSerializer
		stream.Serializer = watchEvents{stream.Serializer}
		info.Serializer, info.StreamSerializer = watchObjects[T, P]{info.Serializer, gv}, &stream
		infos[i] = info
	}
	return watchSerializer{codecs, infos}
}

func (w watchSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return w.infos }

// watchEvents decodes a watch event's frame into metav1.WatchEvent, its
// object kept as raw JSON, without first reading its kind: an event has none.
type watchEvents struct{ runtime.Serializer }

func (d watchEvents) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, gvk, into)
	}
	*ev = metav1.WatchEvent{}
	if typ, obj, ok := envelope(data); ok {
		ev.Type, ev.Object.Raw = typ, bytes.Clone(obj)
	} else if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, ev); err != nil {
		return nil, nil, err
	}
	return ev, &schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}, nil
}

// envelope splits a watch event as kube-apiserver writes it,
// {"type":"TYPE","object":OBJECT} (and a newline), into TYPE and OBJECT,
// without reading OBJECT: the object's decoder reads and checks it. Any
// other layout is not split (ok false), and goes to a JSON decoder.
func envelope(data []byte) (typ string, obj []byte, ok bool) {
	rest, ok := bytes.CutPrefix(bytes.TrimRight(data, " \t\r\n"), []byte(`{"type":"`))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.ContainsFunc(rest[:end], func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return "", nil, false
	}
	if obj, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"object":`)); !ok {
		return "", nil, false
	}
	if obj, ok = bytes.CutSuffix(obj, []byte("}")); !ok || len(obj) == 0 {
		return "", nil, false
	}
	return string(rest[:end]), obj, true
}

// watchObjects decodes a watch event's object straight into the version's
// type when it is a ServiceImport of the version, and with codecs otherwise.
type watchObjects[T any, P typedImport[T]] struct {
	runtime.Serializer
	gv schema.GroupVersion
}

func (d watchObjects[T, P]) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		obj := P(new(T))
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj); err == nil {
			if got := obj.GetObjectKind().GroupVersionKind(); got == d.gv.WithKind("ServiceImport") {
				return &decoded[T, P]{Object: obj}, &got, nil
			}
		}
	}
	return d.Serializer.Decode(data, gvk, into)
}

// readJSON makes the import of the JSON of one ServiceImport of version.
func readJSON(version string, data []byte) (*Import, error) {
	tv := typedVersions[version]
	if tv == nil {
		return nil, fmt.Errorf("ServiceImport %s is not a version the plugin reads", version)
	}
	obj, err := tv.decode(data)
	if err != nil {
		return nil, err
	}
	if im, ok := tv.read(obj, nil); ok {
		return im, nil
	}
	return nil, fmt.Errorf("ServiceImport %s: decoded a %T", version, obj)
}

// ImportClient lists and watches the ServiceImports of one version, each
// object decoded into that version's Go type.
type ImportClient interface {
	List(ctx context.Context, version string, o metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, version string, o metav1.ListOptions) (watch.Interface, error)
}

// NewImportClient returns the ImportClient of the API server cfg names:
// per version, a REST client for lists and one for watches, on the HTTP
// client hc (rest.HTTPClientFor), which the plugin's other clients share.
func NewImportClient(cfg *rest.Config, hc *http.Client) (ImportClient, error) {
	c := restImports{}
	for version, tv := range typedVersions {
		client := func(codecs runtime.NegotiatedSerializer) (rest.Interface, error) {
			vc := rest.CopyConfig(cfg)
			vc.GroupVersion = &tv.gv
			vc.APIPath = "/apis"
			vc.ContentType = runtime.ContentTypeJSON // CRDs have no protobuf
			vc.AcceptContentTypes = runtime.ContentTypeJSON
			vc.NegotiatedSerializer = codecs
			return rest.RESTClientForConfigAndClient(vc, hc)
		}
		var vc versionClients
		var err error
		if vc.list, err = client(tv.codecs); err == nil {
			vc.watch, err = client(tv.watchCodecs)
		}
		if err != nil {
			return nil, err
		}
		c[version] = vc
	}
	return c, nil
}

// restImports holds the REST clients of each version.
type restImports map[string]versionClients

// versionClients are one version's REST client for lists and the one for
// watches, which decodes with the version's watchCodecs.
type versionClients struct{ list, watch rest.Interface }

// request is a GET of version's ServiceImports with the list options o.
func (c restImports) request(version string, o *metav1.ListOptions) (*rest.Request, error) {
	clients, ok := c[version]
	if !ok {
		return nil, fmt.Errorf("ServiceImport %s is not a version the plugin reads", version)
	}
	rc := clients.list
	if o.Watch {
		rc = clients.watch
	}
	var timeout time.Duration
	if o.TimeoutSeconds != nil {
		timeout = time.Duration(*o.TimeoutSeconds) * time.Second
	}
	return rc.Get().Resource(mcsv1beta1.ServiceImportPluralName).VersionedParams(o, metav1.ParameterCodec).Timeout(timeout), nil
}

func (c restImports) List(ctx context.Context, version string, o metav1.ListOptions) (runtime.Object, error) {
	req, err := c.request(version, &o)
	if err != nil {
		return nil, err
	}
	return req.Do(ctx).Get()
}

func (c restImports) Watch(ctx context.Context, version string, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	req, err := c.request(version, &o)
	if err != nil {
		return nil, err
	}
	return req.Watch(ctx)
}

// newImport starts the import of an object read through version.
func newImport(m metav1.Object, version string) *Import {
	return blankImport(Meta{Namespace: intern(m.GetNamespace()), Name: m.GetName(), ResourceVersion: m.GetResourceVersion()}, version)
}
