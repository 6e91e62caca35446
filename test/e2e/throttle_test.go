package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// throttleReplicas is how many replicas start at once against a throttled
// API server.
const throttleReplicas = 20

// throttleSlack is the clock slack allowed when a retry's gap is compared
// with Retry-After: the audit log stamps the 429 when it is written, the
// client reads it a little later.
const throttleSlack = 50 * time.Millisecond

// TestThrottledStart is issue 30's throttling outcome, on a control plane of
// its own. Each replica has an identity of its own, and a FlowSchema puts
// them in a PriorityLevelConfiguration of one seat (kube-apiserver's total
// concurrency is 150 here: nominalConcurrencyShares 1 of 248 is
// ceil(150/248) = 1), which neither lends nor borrows, with one queue of at
// most 10 requests, and rejects what does not fit with a 429. 20 replicas
// of ours start at once, into that level while it is still a jail of no
// seat, until each has had a 429 or is ready: every one becomes ready and
// answers right, the audit log shows 429s to them, and after each 429 the
// replica's next request for the same objects comes no sooner than the
// Retry-After the API server sent with it. A replica that was serving
// before the storm answers every lookup throughout. The same storm of 20 stock CoreDNS replicas (its
// kubernetes plugin with `multicluster`, with the official coredns chart's
// rules) gives the requests per replica until ready to compare with.
//
// The audit log does not hold response headers: Retry-After is kube-apiserver's
// dropped-requests tracker's, which apfRetryAfters replays from the audit log;
// throttleCalibrate first checks the replay against real headers.
func TestThrottledStart(t *testing.T) {
	// Without stock CoreDNS the storm of ours is still run, and the
	// comparison dropped: not under noSkip, where it fails at once.
	stockBin := os.Getenv("E2E_STOCK_COREDNS")
	if stockBin == "" && noSkip() {
		t.Fatalf("E2E_STOCK_COREDNS is not set: no stock CoreDNS to compare with (hack/stock.sh builds it, hack/test.sh passes it; %s is set: nothing may be dropped)", noSkipEnv)
	}
	t.Parallel()
	r := migStartWith(t, "throttle", "throttle", harness.Options{
		CRDs:  []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)},
		Audit: true,
		// APF's total concurrency is these two summed: 150 rather than
		// 600, so that one share of a priority level is one seat.
		APIServerFlags: map[string]string{"max-requests-inflight": "100", "max-mutating-requests-inflight": "50"},
	})
	r.populate("v1beta1")
	r.runCoreDNS()
	r.expectAll()
	r.Probe()

	calibrated := throttleCalibrate(t, r)
	ours := throttleStorm(t, r, "ours", coredns, pluginRole(t), func(kubeconfig string) string {
		return harness.MulticlusterBlock(kubeconfig)
	})
	var stock *throttleResult
	if stockBin == "" {
		t.Log("E2E_STOCK_COREDNS is not set: no stock CoreDNS to compare with (hack/stock.sh builds it, hack/test.sh passes it)")
	} else {
		stock = throttleStorm(t, r, "stock", stockBin, chartClusterRole(), func(kubeconfig string) string {
			return "kubernetes clusterset.local {\n\tkubeconfig " + kubeconfig + "\n\tmulticluster clusterset.local\n}\n"
		})
	}
	total, failed := r.Report()
	throttleSummary(t, calibrated, ours, stock, total, failed)
	if ours.total429 == 0 {
		t.Error("ours: no 429 in the audit log: the storm was not throttled")
	}
	for _, v := range ours.violations {
		t.Errorf("ours asked again sooner than Retry-After said: %s", v)
	}
	r.CheckLog()
}

// pluginRole is the ClusterRole deploy/rbac.yaml grants the plugin.
func pluginRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	role, err := harness.ClusterRoleFromFile(filepath.Join(env.Repo, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return role
}

// throttleLevel creates a priority level with shares seats (of a total
// concurrency of 150; 0 is a jail, where a request is rejected while another
// of the level executes), which neither lends nor borrows and limits as
// limit says, and a FlowSchema that puts users in it, and waits until the
// API server classifies users[0]'s requests there. It returns the level.
func throttleLevel(t *testing.T, r *migRig, name string, shares int32, limit flowcontrolv1.LimitResponse, users []*harness.Identity) *flowcontrolv1.PriorityLevelConfiguration {
	t.Helper()
	fc := r.Env.Clientset.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(r.Ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       throttleSpec(shares, limit),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var subjects []flowcontrolv1.Subject
	for _, id := range users {
		subjects = append(subjects, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: id.Name}})
	}
	_, err = fc.FlowSchemas().Create(r.Ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			// Before global-default (9900), which matches them otherwise.
			MatchingPrecedence:  500,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: subjects,
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"},
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's APF controller takes up new objects from a watch.
	client := throttleClient(t, users[0])
	harness.Eventually(t, 20*time.Second, func() error {
		resp, err := throttleGet(r.Ctx, client, users[0], throttleListPath)
		if err != nil {
			return err
		}
		if got := resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID); got != string(pl.UID) {
			return fmt.Errorf("%s's requests are classified in priority level %s, not yet in %s (%s)", users[0].Name, got, name, pl.UID)
		}
		return nil
	})
	return pl
}

// throttleSpec is a limited priority level of shares seats that neither
// lends nor borrows.
func throttleSpec(shares int32, limit flowcontrolv1.LimitResponse) flowcontrolv1.PriorityLevelConfigurationSpec {
	return flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To(shares),
			LendablePercent:          ptr.To[int32](0),
			BorrowingLimitPercent:    ptr.To[int32](0),
			LimitResponse:            limit,
		},
	}
}

// throttleReject rejects what finds no free seat, at once.
var throttleReject = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}

// throttleQueue is how the storms' priority level limits: one queue of at
// most 10 requests waits for the seat, and what does not fit is rejected.
// With no queue at all (Reject), the replicas' retries come back in herds,
// all after the same Retry-After, which the API server then doubles: 20 of
// ours took up to 108s to be ready, with Retry-After up to 16s.
var throttleQueue = flowcontrolv1.LimitResponse{
	Type:    flowcontrolv1.LimitResponseTypeQueue,
	Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 10},
}

// throttleListPath is a list every identity of the test may make.
const throttleListPath = "/apis/multicluster.x-k8s.io/v1beta1/serviceimports"

// throttleClient is an HTTP client with id's credentials, to read response
// headers that client-go's typed clients hide.
func throttleClient(t *testing.T, id *harness.Identity) *http.Client {
	t.Helper()
	client, err := rest.HTTPClientFor(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// throttleGet GETs path as id, once, without client-go's retries.
func throttleGet(ctx context.Context, client *http.Client, id *harness.Identity, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(id.Config.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// throttleIdentities provisions n identities bound to role, named
// throttle-<what>-NN.
func throttleIdentities(t *testing.T, r *migRig, what string, n int, role *rbacv1.ClusterRole) []*harness.Identity {
	t.Helper()
	ids := make([]*harness.Identity, n)
	for i := range ids {
		id, err := r.Env.Identity(r.Ctx, fmt.Sprintf("throttle-%s-%02d", what, i), role)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// throttleCalibrate checks, with GETs of its own in a priority level of its
// own (one seat, no queue), that apfRetryAfters predicts from the audit log
// the Retry-After of every 429 the API server sends. Bursts of 8 GETs at
// once, twice a second for 4 seconds: more than 3 429s a second, which
// double Retry-After. The bursts start 150 and 550ms past a second, so that
// no 429 is near a second's end, where the replay may tell its second
// wrong. It returns the Retry-Afters seen.
func throttleCalibrate(t *testing.T, r *migRig) []int64 {
	t.Helper()
	id := throttleIdentities(t, r, "calibrate", 1, pluginRole(t))[0]
	throttleLevel(t, r, "throttle-calibrate", 1, throttleReject, []*harness.Identity{id})
	client := throttleClient(t, id)
	sent := map[types.UID]int64{} // Retry-After of each 429, by Audit-Id
	var mu sync.Mutex
	start := time.Now()
	for i := range 8 {
		time.Sleep(time.Until(nextPast(time.Duration(150+400*(i%2)) * time.Millisecond)))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				resp, err := throttleGet(r.Ctx, client, id, throttleListPath)
				if err != nil || resp.StatusCode != http.StatusTooManyRequests {
					return
				}
				after, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
				if err != nil {
					t.Errorf("calibration: a 429 with Retry-After %q", resp.Header.Get("Retry-After"))
				}
				mu.Lock()
				sent[types.UID(resp.Header.Get("Audit-Id"))] = after
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	evs, err := r.Env.AuditEvents(id.Name, start)
	if err != nil {
		t.Fatal(err)
	}
	rejected := throttled(evs)
	predicted := apfRetryAfters(t, rejected)
	var seen []int64
	for _, ev := range rejected {
		got, ok := sent[ev.AuditID]
		if !ok {
			t.Fatalf("calibration: the audit log has a 429 (%s) the client did not get", ev.AuditID)
		}
		if got != predicted[ev.AuditID] {
			t.Errorf("calibration: the 429 %s at %s came with Retry-After %d, the replay of kube-apiserver's dropped-requests tracker says %d",
				ev.AuditID, ev.StageTimestamp.Format("15:04:05.000000"), got, predicted[ev.AuditID])
		}
		seen = append(seen, got)
	}
	if len(rejected) != len(sent) || len(rejected) < 10 || slices.Max(seen) < 2 {
		t.Fatalf("calibration: %d 429s in the audit log, %d to the client, Retry-After %v: want as many, at least 10, and some Retry-After above 1",
			len(rejected), len(sent), seen)
	}
	return seen
}

// nextPast is the next time d past a whole second.
func nextPast(d time.Duration) time.Time {
	now := time.Now()
	next := now.Truncate(time.Second).Add(d)
	if !next.After(now) {
		next = next.Add(time.Second)
	}
	return next
}

// throttled keeps the 429s of evs, in the order they were answered.
func throttled(evs []auditv1.Event) []auditv1.Event {
	var out []auditv1.Event
	for _, ev := range evs {
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusTooManyRequests {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b auditv1.Event) int { return a.StageTimestamp.Compare(b.StageTimestamp.Time) })
	return out
}

// apfRetryAfters replays kube-apiserver's dropped-requests tracker over a
// priority level's 429s and returns the Retry-After each was sent with, by
// audit ID. The tracker records a 429 at a time between the audit event's
// two timestamps (request received, response written): each is replayed,
// and the lower Retry-After of the two taken.
func apfRetryAfters(t *testing.T, rejected []auditv1.Event) map[types.UID]int64 {
	t.Helper()
	out := map[types.UID]int64{}
	received := func(ev auditv1.Event) time.Time { return ev.RequestReceivedTimestamp.Time }
	answered := func(ev auditv1.Event) time.Time { return ev.StageTimestamp.Time }
	for _, at := range []func(auditv1.Event) time.Time{received, answered} {
		evs := slices.Clone(rejected)
		slices.SortStableFunc(evs, func(a, b auditv1.Event) int { return at(a).Compare(at(b)) })
		for i, after := range droppedRequestsReplay(t, evs, at) {
			if prev, ok := out[evs[i].AuditID]; !ok || after < prev {
				out[evs[i].AuditID] = after
			}
		}
	}
	return out
}

// droppedRequestsReplay runs kube-apiserver's own dropped-requests tracker
// (k8s.io/apiserver v0.37.2's pkg/util/flowcontrol, in the kube-apiserver
// v1.37.2 that hack/realenv builds) over a priority level's 429s, at the
// times at gives them, and returns the Retry-After each was sent with: as
// APF's filter does, it records the drop, then reads the tracker's
// Retry-After. The tracker reads the time itself; synctest's fake clock
// brings it to each 429's time, as far past a whole second (the bubble
// starts at one) as the 429 was.
func droppedRequestsReplay(t *testing.T, rejected []auditv1.Event, at func(auditv1.Event) time.Time) []int64 {
	out := make([]int64, len(rejected))
	if len(rejected) == 0 {
		return out
	}
	synctest.Test(t, func(*testing.T) {
		tracker, start, first := flowcontrol.NewDroppedRequestsTracker(), time.Now(), at(rejected[0]).Truncate(time.Second)
		for i, ev := range rejected {
			time.Sleep(time.Until(start.Add(at(ev).Sub(first))))
			tracker.RecordDroppedRequest("replayed")
			out[i] = tracker.GetRetryAfter("replayed")
		}
	})
	return out
}

// throttleResult is what the audit log says of one storm.
type throttleResult struct {
	what     string
	readyMax time.Duration // the slowest replica's time to ready
	requests []int         // per replica: its requests until it was ready
	rejected []int         // per replica: the 429s among them
	total429 int           // 429s to the replicas until the audit log was read
	// asked is the Retry-After of each 429, by audit ID.
	asked map[types.UID]int64
	// minGap is the shortest time from a 429 to the replica's next request
	// for the same objects, and gapAsked that 429's Retry-After; -1 without
	// such a pair.
	minGap     time.Duration
	gapAsked   int64
	violations []string
}

// throttleStorm provisions throttleReplicas identities bound to role and
// puts them in a priority level of their own that starts as a jail (no
// seat: a request gets a 429 while another of the level executes). It
// starts a replica of bin as each at once (plugins is the server block's
// body for a kubeconfig), and once every replica has had a 429 or is ready
// opens the level to one seat and a queue of 10 (throttleOpen). It waits
// until every replica is ready and answers right, reads the audit log, and
// stops them. Without the jail, the starts spread out on a busy machine: in
// a full run of hack/test.sh, 20 of ours fitted in one seat and a queue of
// 10 and got no 429.
func throttleStorm(t *testing.T, r *migRig, what, bin string, role *rbacv1.ClusterRole, plugins func(kubeconfig string) string) *throttleResult {
	t.Helper()
	ids := throttleIdentities(t, r, what, throttleReplicas, role)
	// The probe that finds the level in force gets 429s in it too.
	probe := throttleIdentities(t, r, what+"-probe", 1, role)[0]
	jailed := time.Now()
	pl := throttleLevel(t, r, "throttle-"+what, 0, throttleReject, append([]*harness.Identity{probe}, ids...))
	start := time.Now()
	replicas := make([]*harness.CoreDNS, len(ids))
	errs := make([]error, len(ids))
	done := make([]atomic.Bool, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			// Retry-After doubles while the jail rejects 20 replicas' retries:
			// stock's replicas were sent up to 16s.
			replicas[i], errs[i] = harness.TryRunCoreDNS(t, bin, harness.CoreDNSOptions{
				Plugins:     plugins(id.Kubeconfig),
				ReadyWithin: 3 * time.Minute,
			})
			done[i].Store(true)
			if errs[i] != nil { // its output repeats "not ready" a hundred times a second
				errs[i] = fmt.Errorf("%s: %s", id.Name, harness.Abridge(errs[i].Error(), 40, 20))
			}
		})
	}
	opened := throttleOpen(r, pl, ids, done, start)
	wg.Wait()
	if opened != nil {
		t.Fatalf("%s: %v", what, opened)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%s: not every replica became ready: %v", what, err)
	}
	t.Logf("%s: %d replicas started at once, all ready in %.1fs", what, len(ids), time.Since(start).Seconds())
	for i, c := range replicas {
		if err := throttleAnswers(r, c); err != nil {
			t.Errorf("%s: %s answers wrong once ready: %v", what, ids[i].Name, err)
		}
	}
	res := throttleAudit(t, r, what, ids, probe, replicas, jailed, start)
	// Stopped now, so that the next storm has the CPU to itself; at once,
	// for each may take a second.
	for _, c := range replicas {
		wg.Go(func() {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return res
}

// throttleOpen waits until each of ids has had a 429 since start or is
// done starting, and then gives pl one seat and throttleQueue; also when the
// wait fails, so that the replicas can finish starting. A jail lets a
// request through when no other of its level is executing (kube-apiserver's
// queueSet.canAccommodateSeatsLocked), so a replica may pass it unrejected.
func throttleOpen(r *migRig, pl *flowcontrolv1.PriorityLevelConfiguration, ids []*harness.Identity, done []atomic.Bool, start time.Time) error {
	err := harness.Poll(60*time.Second, func() error {
		// The whole log at once: read per replica, it took the CPU the
		// replicas start with.
		evs, err := r.Env.AuditEvents("", start)
		if err != nil {
			return err
		}
		had := map[string]bool{}
		for _, ev := range throttled(evs) {
			had[ev.User.Username] = true
		}
		var still []*harness.Identity
		for i, id := range ids {
			if !had[id.Name] && !done[i].Load() {
				still = append(still, id)
			}
		}
		if len(still) > 0 {
			return fmt.Errorf("%d replicas have had no 429 in the jail and are not ready, %s among them", len(still), still[0].Name)
		}
		return nil
	})
	patch, perr := json.Marshal(map[string]any{"spec": throttleSpec(1, throttleQueue)})
	if perr == nil {
		_, perr = r.Env.Clientset.FlowcontrolV1().PriorityLevelConfigurations().Patch(r.Ctx, pl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return errors.Join(err, perr)
}

// throttleAnswers asks c once for every name the prober expects one answer
// for, and says which answers are not those.
func throttleAnswers(r *migRig, c *harness.CoreDNS) error {
	var errs []error
	for name, ips := range r.Prober.Settled() {
		m, err := harness.Exchange(c.Addr(), name, dns.TypeA)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		var got []string
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		slices.Sort(got)
		if m.Rcode != dns.RcodeSuccess || !slices.Equal(got, ips) {
			errs = append(errs, fmt.Errorf("%s: %s %v, want %v", name, dns.RcodeToString[m.Rcode], got, ips))
		}
	}
	return errors.Join(errs...)
}

// throttleAudit reads each replica's requests since start from the audit
// log: how many until it was ready, how many of them 429s, and how long
// after each 429 it asked for the same objects again. The probe's 429s
// since jailed are replayed with theirs, for they count towards the
// Retry-After the replicas got.
func throttleAudit(t *testing.T, r *migRig, what string, ids []*harness.Identity, probe *harness.Identity, replicas []*harness.CoreDNS, jailed, start time.Time) *throttleResult {
	t.Helper()
	res := &throttleResult{what: what, minGap: -1}
	// The log once, for every identity: the replicas' since start, the
	// probe's since jailed.
	evs, err := r.Env.AuditEvents("", jailed)
	if err != nil {
		t.Fatal(err)
	}
	replica := map[string]int{}
	for i, id := range ids {
		replica[id.Name] = i
	}
	perUser := make([][]auditv1.Event, len(ids))
	var all, probed []auditv1.Event
	for _, ev := range evs {
		if i, ok := replica[ev.User.Username]; ok && !ev.StageTimestamp.Time.Before(start) {
			perUser[i] = append(perUser[i], ev)
			all = append(all, ev)
		} else if ev.User.Username == probe.Name {
			probed = append(probed, ev)
		}
	}
	for _, evs := range perUser {
		slices.SortStableFunc(evs, func(a, b auditv1.Event) int {
			return a.RequestReceivedTimestamp.Compare(b.RequestReceivedTimestamp.Time)
		})
	}
	// Every 429 of the priority level is one of these replicas' or the
	// probe's.
	rejected := throttled(all)
	res.total429 = len(rejected)
	res.asked = apfRetryAfters(t, append(rejected, throttled(probed)...)) // it orders them itself
	for _, ev := range probed {
		delete(res.asked, ev.AuditID)
	}
	for i, id := range ids {
		c := replicas[i]
		ready := c.Started.Add(c.ReadyIn)
		res.readyMax = max(res.readyMax, c.ReadyIn)
		n, n429 := 0, 0
		for _, ev := range perUser[i] {
			if ev.RequestReceivedTimestamp.After(ready) {
				break
			}
			n++
			if _, ok := res.asked[ev.AuditID]; ok {
				n429++
			}
		}
		res.requests, res.rejected = append(res.requests, n), append(res.rejected, n429)
		res.gaps(id.Name, perUser[i])
	}
	return res
}

// gaps finds, after each 429 of evs (one replica's requests, in the order
// received), the replica's next request for the same objects (auditTarget),
// and records the time between them.
func (res *throttleResult) gaps(user string, evs []auditv1.Event) {
	for i, ev := range evs {
		after, ok := res.asked[ev.AuditID]
		if !ok {
			continue
		}
		next, ok := nextRequest(evs, i)
		if !ok {
			continue
		}
		gap := next.RequestReceivedTimestamp.Sub(ev.StageTimestamp.Time)
		if res.minGap < 0 || gap < res.minGap {
			res.minGap, res.gapAsked = gap, after
		}
		if gap < time.Duration(after)*time.Second-throttleSlack {
			res.violations = append(res.violations, fmt.Sprintf("%s: %s %s got 429 with Retry-After %ds at %s; %s %s came %.3fs later",
				user, ev.Verb, ev.RequestURI, after, ev.StageTimestamp.Format("15:04:05.000000"),
				next.Verb, next.RequestURI, gap.Seconds()))
		}
	}
}

// nextRequest is the first request of evs after evs[i] for the same
// objects (auditTarget); evs are one identity's requests in the order
// received.
func nextRequest(evs []auditv1.Event, i int) (auditv1.Event, bool) {
	target := auditTarget(evs[i])
	for _, next := range evs[i+1:] {
		if auditTarget(next) == target {
			return next, true
		}
	}
	return auditv1.Event{}, false
}

// auditTarget is what an audited request reads: its path and selectors. A
// list and a watch of the same objects share it; two informers of one
// resource with different selectors (stock has two of EndpointSlices) do
// not. Other parameters (a watch's random timeout) may change on a retry.
func auditTarget(ev auditv1.Event) string {
	path, query, _ := strings.Cut(ev.RequestURI, "?")
	q, _ := url.ParseQuery(query)
	return path + "?labelSelector=" + q.Get("labelSelector") + "&fieldSelector=" + q.Get("fieldSelector")
}

// throttleSummary prints the storms' figures in one line.
func throttleSummary(t *testing.T, calibrated []int64, ours, stock *throttleResult, total, failed int64) {
	t.Helper()
	median := func(xs []int) int {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	describe := func(res *throttleResult) string {
		gap := "no request followed a 429 for the same objects"
		if res.minGap >= 0 {
			gap = fmt.Sprintf("min gap after a 429 %.3fs (its Retry-After %ds)", res.minGap.Seconds(), res.gapAsked)
		}
		return fmt.Sprintf("%s ready in max %.1fs, requests until ready per replica median %d (max %d), 429s among them median %d (max %d), %d 429s in all (Retry-After %s), %s",
			res.what, res.readyMax.Seconds(), median(res.requests), slices.Max(res.requests), median(res.rejected), slices.Max(res.rejected),
			res.total429, retryAfterCounts(slices.Collect(maps.Values(res.asked))), gap)
	}
	parts := []string{describe(ours)}
	if stock != nil {
		parts = append(parts, describe(stock))
	}
	line := fmt.Sprintf("throttle: %d replicas at once into a jail, then one seat and a queue of 10: %s; calibration: %d 429s (Retry-After %s) as replayed; %d lookups to a serving replica, %d failed",
		throttleReplicas, strings.Join(parts, "; "), len(calibrated), retryAfterCounts(calibrated), total, failed)
	t.Log(line)
	fmt.Println(line)
}

// retryAfterCounts says how many times each Retry-After was sent: "1s×12 2s×3".
func retryAfterCounts(afters []int64) string {
	n := map[int64]int{}
	for _, a := range afters {
		n[a]++
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%ds×%d", a, n[a]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
