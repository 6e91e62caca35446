package cache

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkDecodeImports compares, for a LIST page of 1,000 v1beta1
// ServiceImports as the API server sends it, the ways from the JSON to the
// cache's slim copies:
//   - plugin: what the plugin does (typed.go). Each object decodes on its
//     own into mcs-api's typed object, and is read;
//   - typed: the JSON decoded straight into mcs-api's typed list, as its
//     generated clientset would, then read: one bad object fails the page;
//   - unstructured: the dynamic client's maps, turned into the typed object
//     with runtime.DefaultUnstructuredConverter, then read: the way to
//     typed objects with per-object failure that client-go offers.
//
// It reports time and allocations per object (issue 14).
func BenchmarkDecodeImports(b *testing.B) {
	const n = 1000
	page := importListPage(b, n)
	b.Run("plugin", func(b *testing.B) {
		tv := typedVersions[V1beta1]
		benchDecodePage(b, n, func(b *testing.B) (got int) {
			obj, err := tv.decode(page)
			if err != nil {
				b.Fatal(err)
			}
			list := obj.(*decodedList[mcsv1beta1.ServiceImport, *mcsv1beta1.ServiceImport])
			for i := range list.Items {
				if im, _ := tv.read(&list.Items[i], nil); im.HasData {
					got++
				}
			}
			return got
		})
	})
	b.Run("unstructured", func(b *testing.B) {
		benchDecodePage(b, n, func(b *testing.B) (got int) {
			var list unstructured.UnstructuredList
			if err := list.UnmarshalJSON(page); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				var si mcsv1beta1.ServiceImport
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &si); err != nil {
					b.Fatal(err)
				}
				if importFromTyped(&si).HasData {
					got++
				}
			}
			return got
		})
	})
	b.Run("typed", func(b *testing.B) {
		benchDecodePage(b, n, func(b *testing.B) (got int) {
			var list mcsv1beta1.ServiceImportList
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(page, &list); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				if importFromTyped(&list.Items[i]).HasData {
					got++
				}
			}
			return got
		})
	})
}

// importListPage is the JSON of a LIST page of n v1beta1 ServiceImports as
// the API server sends it.
func importListPage(b *testing.B, n int) []byte {
	type item map[string]any
	items := make([]item, n)
	for i := range items {
		items[i] = item{
			"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{"name": fmt.Sprintf("svc-%05d", i), "namespace": fmt.Sprintf("ns-%02d", i%20),
				"resourceVersion": fmt.Sprint(1000 + i), "uid": fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
				"creationTimestamp": "2026-12-03T10:00:00Z", "generation": 1},
			"spec": map[string]any{"type": "ClusterSetIP", "ips": []string{fmt.Sprintf("10.0.%d.%d", i>>8, i&255)},
				"ports": []map[string]any{{"name": "http", "protocol": "TCP", "port": 80}, {"name": "grpc", "protocol": "TCP", "port": 9090}}},
			"status": map[string]any{"clusters": []map[string]any{{"cluster": "east"}, {"cluster": "west"}}},
		}
	}
	page, err := json.Marshal(map[string]any{"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImportList",
		"metadata": map[string]any{"resourceVersion": "5000"}, "items": items})
	if err != nil {
		b.Fatal(err)
	}
	return page
}

// benchDecodePage runs decode, which turns the page of n imports into the
// cache's copies and returns how many have data, b.N times; it fails unless
// all n have, and reports time per object instead of per page.
func benchDecodePage(b *testing.B, n int, decode func(*testing.B) int) {
	b.ReportAllocs()
	for range b.N {
		if got := decode(b); got != n {
			b.Fatalf("%d imports with data, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/object")
	b.ReportMetric(0, "ns/op")
}

// importFromTyped is the plugin's reading of mcs-api's typed object.
func importFromTyped(si *mcsv1beta1.ServiceImport) *Import {
	im, _ := typedVersions[V1beta1].read(&decoded[mcsv1beta1.ServiceImport, *mcsv1beta1.ServiceImport]{Object: si}, nil)
	return im
}
