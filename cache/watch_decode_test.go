package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// watchStream is a v1beta1 watch as kube-apiserver writes it, one event a
// line: what a view must read from it, and the ways it can go wrong.
var watchStream = []string{
	`{"type":"ADDED","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"a","namespace":"ns","resourceVersion":"10","uid":"u-a"},"spec":{"type":"ClusterSetIP","ips":["10.0.0.1"],"ports":[{"name":"http","protocol":"TCP","port":80}]},"status":{"clusters":[{"cluster":"east"}]}}}`,
	// A field of another JSON type: the object comes with decode_error.
	`{"type":"MODIFIED","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"b","namespace":"ns","resourceVersion":"11"},"spec":{"type":"ClusterSetIP","ips":"10.0.0.2"}}}`,
	// Names are case-sensitive, as everywhere in Kubernetes: "IPs" is not "ips".
	`{"type":"MODIFIED","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"c","namespace":"ns","resourceVersion":"12"},"spec":{"type":"ClusterSetIP","IPs":["10.0.0.3"]}}}`,
	`{"type":"BOOKMARK","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"resourceVersion":"13","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
	`{"type":"DELETED","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"a","namespace":"ns","resourceVersion":"14"},"spec":{"type":"ClusterSetIP","ips":["10.0.0.1"]}}}`,
	`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (14)","reason":"Expired","code":410}}`,
}

// The plugin's watch (watchSerializer, through NewImportClient) reads every
// event as client-go does with the version's codecs, from a real HTTP
// watch: the same event types, imports and errors, also for an object of
// another version, one that is not an object, and a broken stream.
func TestWatchDecodesAsClientGo(t *testing.T) {
	tv := typedVersions[V1beta1]
	streams := map[string][]string{
		"events":          watchStream,
		"another version": {watchStream[0], strings.Replace(watchStream[0], "/v1beta1", "/v1alpha1", 1)},
		"another kind":    {strings.Replace(watchStream[0], `"kind":"ServiceImport"`, `"kind":"ServiceExport"`, 1)},
		"not an object":   {`{"type":"ADDED","object":["x"]}`},
		"broken":          {watchStream[0], `{"type":"ADDED","object":{"apiVersion"`},
		"unknown type":    {`{"type":"CHANGED","object":{}}`},
		// Layouts kube-apiserver does not write: what envelope does not
		// split is decoded as JSON.
		"other layouts": {
			strings.Replace(watchStream[0], `{"type":"ADDED","object":`, `{"object":`, 1)[:len(watchStream[0])-len(`{"type":"ADDED","object":`)+len(`{"object":`)-1] + `,"type":"ADDED"}`,
			strings.Replace(watchStream[5], `","object":`, `" , "object" : `, 1),
			strings.Replace(watchStream[4], `"DELETED"`, `"DELETED"`, 1),
			strings.Replace(watchStream[0], `{"type":"ADDED","object":`, "{\n  \"type\": \"ADDED\",\n  \"object\": ", 1),
		},
		"null object": {`{"type":"ADDED","object":null}`},
		"no object":   {`{"type":"ADDED","object":}`},
	}
	for name, lines := range streams {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, strings.Join(lines, "\n")+"\n")
		}))
		cfg := &rest.Config{Host: srv.URL}
		ours, err := NewImportClient(cfg, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		w, err := ours.Watch(context.Background(), V1beta1, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := readWatch(t, w)
		// The oracle: client-go's REST client with the version's codecs,
		// which is how the plugin decoded watches before watchSerializer.
		vc := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{GroupVersion: &tv.gv, NegotiatedSerializer: tv.codecs}, APIPath: "/apis"}
		rc, err := rest.RESTClientForConfigAndClient(vc, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		w, err = rc.Get().Resource("serviceimports").Param("watch", "true").Watch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := readWatch(t, w)
		srv.Close()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the plugin read\n%s\nclient-go reads\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if n := len(lines); (name == "events" || name == "other layouts") && len(got) != n {
			t.Errorf("%s: %d read, want %d:\n%s", name, len(got), n, strings.Join(got, "\n"))
		}
	}
}

// readWatch reads w to its end: each event as its type and what a view
// makes of its object (tv.read), or the API error it carries.
func readWatch(t *testing.T, w watch.Interface) (out []string) {
	t.Helper()
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			// A stream that does not decode ends with client-go's error,
			// whose text names the decoder's complaint: only its reason
			// and code must agree.
			out = append(out, fmt.Sprintf("ERROR %s %d", apierrors.ReasonForError(err), apierrors.APIStatus(err.(*apierrors.StatusError)).Status().Code))
			continue
		}
		im, ok := typedVersions[V1beta1].read(ev.Object, nil)
		if !ok {
			out = append(out, fmt.Sprintf("%s %T", ev.Type, ev.Object))
			continue
		}
		out = append(out, fmt.Sprintf("%s %v %v %v %v %v problems %v clusters %v", ev.Type, im.Meta, im.IPs, im.Ports, im.HasData, im.Version(), im.Problems(), im.Clusters()))
	}
	return out
}

// BenchmarkDecodeWatch decodes a watch of 1,000 v1beta1 ServiceImports, as
// the initial events of a watch list bring them, the way rest.Request.Watch
// does, with the plugin's watchSerializer and with the version's codecs
// (client-go's way, and the plugin's before): time and allocations per
// object.
func BenchmarkDecodeWatch(b *testing.B) {
	const n = 1000
	tv := typedVersions[V1beta1]
	var stream bytes.Buffer
	for i := range n {
		fmt.Fprintf(&stream, `{"type":"ADDED","object":{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"svc-%05d","namespace":"ns-%02d","resourceVersion":"%d","uid":"00000000-0000-0000-0000-%012d","creationTimestamp":"2026-12-03T10:00:00Z","generation":1},"spec":{"type":"ClusterSetIP","ips":["10.0.%d.%d"],"ports":[{"name":"http","protocol":"TCP","port":80},{"name":"grpc","protocol":"TCP","port":9090}]},"status":{"clusters":[{"cluster":"east"},{"cluster":"west"}]}}}`+"\n",
			i, i%20, 1000+i, i, i>>8, i&255)
	}
	for _, c := range []struct {
		name   string
		codecs runtime.NegotiatedSerializer
	}{{"plugin", tv.watchCodecs}, {"codecs", tv.codecs}} {
		b.Run(c.name, func(b *testing.B) {
			objects, events, framer, err := runtime.NewClientNegotiator(c.codecs, tv.gv).StreamDecoder(runtime.ContentTypeJSON, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchDecodePage(b, n, func(b *testing.B) (got int) {
				frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream.Bytes())))
				d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, events), objects)
				for {
					_, obj, err := d.Decode()
					if err == io.EOF {
						return got
					}
					if err != nil {
						b.Fatal(err)
					}
					if im, _ := tv.read(obj, nil); im.HasData {
						got++
					}
				}
			})
		})
	}
}
