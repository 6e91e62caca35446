package cache

import (
	"fmt"
	"testing"
)

// Imports and views for the rows of TestChooseImport.

// has is a import with data at resourceVersion rv; the view it is put in
// sets its version.
func has(rv string) *Import {
	return &Import{Meta: Meta{Namespace: "demo", Name: "web", ResourceVersion: rv}, HasData: true}
}

// emptyAt is a import without data at rv: the object read through the other
// shape's version (pruned), or written through a version that is not the
// storage version (its fields dropped).
func emptyAt(rv string) *Import {
	return &Import{Meta: Meta{Namespace: "demo", Name: "web", ResourceVersion: rv}}
}

// refusedAt is an import at rv whose data is not used (a type that is none
// of the two): chosen as an import with data is, answered by nothing.
func refusedAt(rv string) *Import {
	im := emptyAt(rv)
	im.addProblem(ReasonBadType)
	return im
}

// absent is what a view that holds no import of the object holds.
var absent *Import

// inPlace is an answering view of version holding rec.
func inPlace(version string, rec *Import) viewImport {
	if rec != nil {
		rec.setVersion(version)
	}
	return viewImport{version: version, role: answering, im: rec}
}

// unsynced is a starting view of version holding rec.
func unsynced(version string, rec *Import) viewImport {
	r := inPlace(version, rec)
	r.role = starting
	return r
}

// answer is the answer in use, made from a import of version at rv.
func answer(version, rv string) *Import {
	im := has(rv)
	im.setVersion(version)
	return im
}

func views(v ...viewImport) []viewImport { return v }

// answeredBy says what chooseImport returned: "prev", "none", or the version
// of the view whose import it is.
func answeredBy(got *Import, views []viewImport, prev *Import) string {
	switch {
	case got == nil:
		return "none"
	case prev != nil && got == prev:
		return "prev"
	}
	for _, v := range views {
		if v.im == got {
			return v.version
		}
	}
	return fmt.Sprintf("an import of no view: %+v", got)
}

// Every case the migrations go through (test/e2e/migration_*.go and
// versions_test.go), and the edges around them. want is "prev" (the answer
// in use is kept), "none" (no answer), or the version of the view whose
// import answers. loss is judgeLoss's verdict, lostAt its resourceVersion.
func TestChooseImport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		views  []viewImport
		prev   *Import
		unread bool // a shape served may be read by no answering view yet
		want   string
		loss   lossVerdict
		lostAt string
	}{
		// A write whose data is refused: newest, it is chosen (and answers
		// nothing), and it is no loss of data.
		{name: "two views agree on a refused write: it is chosen, no loss",
			views: views(inPlace(V1alpha2, refusedAt("6")), inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha1, "5"),
			want: V1alpha2, loss: notLost},
		{name: "two views agree on a refused write, the other order: it is chosen, no loss",
			views: views(inPlace(V1alpha2, emptyAt("6")), inPlace(V1alpha1, refusedAt("6"))), prev: answer(V1alpha2, "5"),
			want: V1alpha1, loss: notLost},
		{name: "a refused write seen by one view, the other still at the older data: the refused write is chosen",
			views: views(inPlace(V1alpha2, refusedAt("6")), inPlace(V1alpha1, has("5"))), prev: answer(V1alpha1, "5"),
			want: V1alpha2, loss: lossUnknown},
		{name: "a refused write seen by one view, the other order",
			views: views(inPlace(V1alpha2, has("5")), inPlace(V1alpha1, refusedAt("6"))), prev: answer(V1alpha2, "5"),
			want: V1alpha1, loss: lossUnknown},
		// One view, no migration under way.
		{name: "one view: the object with data",
			views: views(inPlace(V1alpha2, has("5"))), want: V1alpha2, loss: notLost},
		{name: "one view: a newer write replaces the answer",
			views: views(inPlace(V1alpha2, has("6"))), prev: answer(V1alpha2, "5"), want: V1alpha2, loss: notLost},
		{name: "one view: the object absent, never answered",
			views: views(inPlace(V1alpha2, absent)), want: "none", loss: notLost},
		{name: "one view: the object deleted",
			views: views(inPlace(V1alpha2, absent)), prev: answer(V1alpha2, "5"), want: "none", loss: notLost},
		{name: "one view: the object empty, never answered (its data is in a shape not read): no loss said",
			views: views(inPlace(V1alpha2, emptyAt("5"))), want: "none", loss: lossUnknown},
		{name: "one view: the answered object now reads empty: data lost",
			views: views(inPlace(V1alpha2, emptyAt("6"))), prev: answer(V1alpha2, "5"), want: "none", loss: lost, lostAt: "6"},
		{name: "one view: the answered object now reads empty, discovery not asked since: the answer stays",
			views: views(inPlace(V1beta1, emptyAt("6"))), prev: answer(V1beta1, "5"), unread: true,
			want: "prev", loss: lossUnknown},
		{name: "one view: the answered object reads empty, discovery since shows no shape unread: data lost",
			views: views(inPlace(V1beta1, emptyAt("6"))), prev: answer(V1beta1, "5"),
			want: "none", loss: lost, lostAt: "6"},
		{name: "one view: the answered object reads empty, the other shape's view starting: the answer stays",
			views: views(inPlace(V1beta1, emptyAt("6")), unsynced(V1alpha2, absent)), prev: answer(V1beta1, "5"),
			want: "prev", loss: lossUnknown},
		{name: "one view: the answered object reads empty, the other shape's view starting with its data: the answer stays",
			views: views(inPlace(V1alpha1, emptyAt("6")), unsynced(V1alpha2, has("6"))), prev: answer(V1alpha1, "5"),
			want: "prev", loss: lossUnknown},
		{name: "one view: the answered object deleted while a shape may be unread: the answer goes",
			views: views(inPlace(V1beta1, absent), unsynced(V1alpha2, absent)), prev: answer(V1beta1, "5"), unread: true,
			want: "none", loss: notLost},
		{name: "one view: an empty object never answered, a shape may be unread: no answer, no loss said",
			views: views(inPlace(V1beta1, emptyAt("6"))), unread: true, want: "none", loss: lossUnknown},
		{name: "one view: the object with data while a shape may be unread: it answers",
			views: views(inPlace(V1beta1, has("6"))), prev: answer(V1beta1, "5"), unread: true, want: V1beta1, loss: notLost},
		{name: "no view (no version served): the answer goes",
			views: views(), prev: answer(V1alpha2, "5"), want: "none", loss: notLost},

		// Starting views: never answered from, not counted as views.
		{name: "a starting view alone does not answer",
			views: views(unsynced(V1beta1, has("5"))), want: "none", loss: notLost},
		{name: "a starting view does not make a lone empty view a data loss",
			views: views(inPlace(V1beta1, emptyAt("9")), unsynced(V1alpha2, emptyAt("9"))), want: "none", loss: lossUnknown},

		// (a) upstream's migration, with fallback v1alpha1: v1alpha1 only,
		// then v1beta1 (same shape) served beside it and taking over once
		// synced and not behind, then v1alpha1 gone
		// (TestMigrationUpstream, TestControllerMovesFromV1alpha1ToV1beta1).
		{name: "upstream: v1beta1 starting beside v1alpha1: v1alpha1 answers",
			views: views(inPlace(V1alpha1, has("5")), unsynced(V1beta1, absent)), prev: answer(V1alpha1, "5"),
			want: V1alpha1, loss: notLost},
		{name: "upstream: the starting v1beta1 view has a newer write: the answer in use stays until it is in place",
			views: views(inPlace(V1alpha1, has("5")), unsynced(V1beta1, has("6"))), prev: answer(V1alpha1, "5"),
			want: V1alpha1, loss: notLost},
		{name: "upstream: v1beta1 in place of v1alpha1 at the same write: the answer moves to v1beta1",
			views: views(inPlace(V1beta1, has("5"))), prev: answer(V1alpha1, "5"), want: V1beta1, loss: notLost},
		{name: "upstream: v1beta1 in place a write behind v1alpha1's answer: the newer answer stays",
			views: views(inPlace(V1beta1, has("5"))), prev: answer(V1alpha1, "6"), want: "prev", loss: notLost},
		{name: "upstream: v1beta1 catches up past the answer",
			views: views(inPlace(V1beta1, has("7"))), prev: answer(V1alpha1, "6"), want: V1beta1, loss: notLost},
		{name: "upstream: rewritten through v1beta1, v1alpha1 gone",
			views: views(inPlace(V1beta1, has("6"))), prev: answer(V1beta1, "5"), want: V1beta1, loss: notLost},

		// (b) v1beta1 to v1alpha2, no options: both shapes watched; the
		// objects rewritten through v1alpha2, their v1beta1 copy read empty
		// (TestMigrationV1beta1ToV1alpha2).
		{name: "to v1alpha2: stored through v1beta1, v1alpha2 reads it empty: v1beta1 answers",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1beta1, has("5"))), want: V1beta1, loss: notLost},
		{name: "to v1alpha2: rewritten, the v1alpha2 view sees it first: v1alpha2 answers",
			views: views(inPlace(V1alpha2, has("6")), inPlace(V1beta1, has("5"))), prev: answer(V1beta1, "5"),
			want: V1alpha2, loss: lossUnknown},
		{name: "to v1alpha2: rewritten, the v1beta1 view sees its copy empty first: the answer stays",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1beta1, emptyAt("6"))), prev: answer(V1beta1, "5"),
			want: "prev", loss: lossUnknown},
		{name: "to v1alpha2: rewritten, both views caught up: v1alpha2 answers",
			views: views(inPlace(V1alpha2, has("6")), inPlace(V1beta1, emptyAt("6"))), prev: answer(V1beta1, "5"),
			want: V1alpha2, loss: notLost},
		{name: "to v1alpha2: created through v1beta1, v1alpha2 not caught up: answered at once",
			views: views(inPlace(V1alpha2, absent), inPlace(V1beta1, has("5"))), want: V1beta1, loss: lossUnknown},
		{name: "to v1alpha2: created through v1alpha2, v1beta1 sees its empty copy first: no answer, no loss said",
			views: views(inPlace(V1alpha2, absent), inPlace(V1beta1, emptyAt("5"))), want: "none", loss: lossUnknown},
		{name: "to v1alpha2: written through v1beta1 after the storage flip: data lost",
			views: views(inPlace(V1alpha2, emptyAt("9")), inPlace(V1beta1, emptyAt("9"))), want: "none", loss: lost, lostAt: "9"},
		{name: "to v1alpha2: v1beta1 no longer served",
			views: views(inPlace(V1alpha2, has("6"))), prev: answer(V1alpha2, "6"), want: V1alpha2, loss: notLost},

		// (c) from v1alpha1 with fallback v1alpha1: v1alpha1 only, then
		// v1alpha2 (the other shape) served as the storage version, the
		// objects rewritten through it, then v1alpha1 gone
		// (TestMigrationFromV1alpha1, TestControllerFallbackMerge).
		// Without the CRD's watch (the coredns chart's rules) the v1alpha2
		// view may start only once an object has moved into its shape
		// (TestMigrationFromV1alpha1/chart_rules).
		{name: "from v1alpha1, CRD not watched: rewritten, v1alpha2 not known to be served yet: the answer stays",
			views: views(inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha1, "5"), unread: true,
			want: "prev", loss: lossUnknown},
		{name: "from v1alpha1, CRD not watched: rewritten, the v1alpha2 view starting: the answer stays",
			views: views(inPlace(V1alpha1, emptyAt("6")), unsynced(V1alpha2, has("6"))), prev: answer(V1alpha1, "5"),
			want: "prev", loss: lossUnknown},
		{name: "from v1alpha1, CRD not watched: rewritten, the v1alpha2 view in place: v1alpha2 answers",
			views: views(inPlace(V1alpha2, has("6")), inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha1, "5"),
			want: V1alpha2, loss: notLost},
		{name: "from v1alpha1: v1alpha2 starting: v1alpha1 answers",
			views: views(inPlace(V1alpha1, has("5")), unsynced(V1alpha2, emptyAt("5"))), prev: answer(V1alpha1, "5"),
			want: V1alpha1, loss: notLost},
		{name: "from v1alpha1: v1alpha2 in place, reads the object empty: v1alpha1 answers",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1alpha1, has("5"))), prev: answer(V1alpha1, "5"),
			want: V1alpha1, loss: notLost},
		{name: "from v1alpha1: rewritten, the v1alpha1 view sees its copy empty first: the answer stays",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha1, "5"),
			want: "prev", loss: lossUnknown},
		{name: "from v1alpha1: rewritten, both views caught up: v1alpha2 answers",
			views: views(inPlace(V1alpha2, has("6")), inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha1, "5"),
			want: V1alpha2, loss: notLost},
		{name: "from v1alpha1: written through v1alpha1 after the storage flip: data lost",
			views: views(inPlace(V1alpha2, emptyAt("9")), inPlace(V1alpha1, emptyAt("9"))), want: "none", loss: lost, lostAt: "9"},
		{name: "from v1alpha1: the newer view reads empty first: the older data of the other does not come back",
			views: views(inPlace(V1alpha2, emptyAt("9")), inPlace(V1alpha1, has("6"))), prev: answer(V1alpha2, "7"),
			want: "prev", loss: lossUnknown},
		{name: "from v1alpha1: an answered object written empty, both views caught up: data lost, no answer",
			views: views(inPlace(V1alpha2, emptyAt("9")), inPlace(V1alpha1, emptyAt("9"))), prev: answer(V1alpha2, "7"),
			want: "none", loss: lost, lostAt: "9"},
		{name: "from v1alpha1: v1alpha1 no longer served",
			views: views(inPlace(V1alpha2, has("6"))), prev: answer(V1alpha2, "6"), want: V1alpha2, loss: notLost},

		// (d) deploy/crds applied over mcs-api's CRD, no options: v1beta1
		// only, then v1alpha2 served beside it, reading every object empty
		// (TestUpgradeOverUpstreamCRD).
		{name: "upgrade: v1alpha2 starting: v1beta1 answers",
			views: views(inPlace(V1beta1, has("5")), unsynced(V1alpha2, absent)), prev: answer(V1beta1, "5"),
			want: V1beta1, loss: notLost},
		{name: "upgrade: v1alpha2 in place, reads every object empty: v1beta1 answers",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1beta1, has("5"))), prev: answer(V1beta1, "5"),
			want: V1beta1, loss: notLost},
		{name: "upgrade: written through v1beta1, seen there first: the new write answers",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1beta1, has("6"))), prev: answer(V1beta1, "5"),
			want: V1beta1, loss: lossUnknown},
		{name: "upgrade: written through v1beta1, seen by v1alpha2 first: v1beta1's import answers",
			views: views(inPlace(V1alpha2, emptyAt("6")), inPlace(V1beta1, has("5"))), prev: answer(V1beta1, "5"),
			want: V1beta1, loss: lossUnknown},

		// Both shapes, whatever the migration.
		{name: "both shapes with data, one behind: the newer wins",
			views: views(inPlace(V1alpha2, has("7")), inPlace(V1alpha1, has("6"))), prev: answer(V1alpha2, "7"),
			want: V1alpha2, loss: lossUnknown},
		{name: "both shapes with data at one write: the root shape, first, wins",
			views: views(inPlace(V1alpha2, has("5")), inPlace(V1beta1, has("5"))), want: V1alpha2, loss: notLost},
		{name: "a delete seen by one view first: the answer stays",
			views: views(inPlace(V1alpha2, absent), inPlace(V1alpha1, emptyAt("6"))), prev: answer(V1alpha2, "6"),
			want: "prev", loss: lossUnknown},
		{name: "deleted from both views: the answer goes",
			views: views(inPlace(V1alpha2, absent), inPlace(V1alpha1, absent)), prev: answer(V1alpha2, "6"),
			want: "none", loss: notLost},
		{name: "the views went back in time (one replaced another): the newer answer stays",
			views: views(inPlace(V1alpha2, emptyAt("5")), inPlace(V1beta1, has("5"))), prev: answer(V1beta1, "6"),
			want: "prev", loss: notLost},

		// resourceVersions are compared as apimachinery does, not as strings.
		{name: "resourceVersion 10 is newer than 9 (root shape behind)",
			views: views(inPlace(V1alpha2, has("9")), inPlace(V1beta1, has("10"))), want: V1beta1, loss: lossUnknown},
		{name: "resourceVersion 10 is newer than 9 (spec shape behind)",
			views: views(inPlace(V1alpha2, has("10")), inPlace(V1beta1, has("9"))), want: V1alpha2, loss: lossUnknown},
		{name: "an answer at 9 is older than data at 10",
			views: views(inPlace(V1beta1, has("10"))), prev: answer(V1beta1, "9"), want: V1beta1, loss: notLost},
		{name: "resourceVersions not well formed: none is newer, the first view with data answers",
			views: views(inPlace(V1alpha2, has("b")), inPlace(V1beta1, has("a"))), prev: answer(V1beta1, "c"),
			want: V1alpha2, loss: lossUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prev *Service
			if tc.prev != nil {
				prev = &Service{rec: tc.prev}
			}
			if got := answeredBy(chooseImport(tc.views, prev, tc.unread), tc.views, tc.prev); got != tc.want {
				t.Errorf("answered by %s, want %s", got, tc.want)
			}
			loss, at := judgeLoss(tc.views, prev, tc.unread)
			if loss != tc.loss || at != tc.lostAt {
				t.Errorf("loss %d at %q, want %d at %q", loss, at, tc.loss, tc.lostAt)
			}
		})
	}
}
