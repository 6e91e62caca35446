package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// Lists and watches wait out an unreachable API server and refused access,
// retrying at a steady pace, and say so once per outage.

// retryEvery is how often a list or watch is retried while the API server
// cannot be reached: often enough that a restarted one is seen within half
// a second, seldom enough (a few requests a second per replica) to be no
// burden on it while it starts.
const retryEvery = 500 * time.Millisecond

// dialTimeout bounds each TCP connection attempt to one address of the API
// server. client-go's own dialer tries for 30 s, so a dial begun during a
// network partition waits out the kernel's SYN retries (1, 3, 7, 15 s apart)
// long after the heal. Attempts of one second, retried at once, send a SYN a
// second and reach a healed API server within about a second.
const dialTimeout = time.Second

// resolveTimeout bounds the name lookup of a host name, which dialTimeout
// does not: a resolver may take its 5 s to move to its next name server.
const resolveTimeout = 30 * time.Second

// errNoAnswer marks a connection attempt that had no answer within
// dialTimeout: the attempt itself waited, so it is retried at once.
var errNoAnswer = errors.New("no answer")

// DialAPIServer dials the API server, for rest.Config's Dial: the host's
// addresses in turn, each with dialTimeout. An attempt that timed out is
// reported as a plain error, not as a net.Error timeout: client-go answers a
// watch whose dial timed out with an empty watch and no error, which its
// reflector retries with a backoff that grows to 30 s, out of
// waitingOutErrors' sight. One that waited dialTimeout for every address is
// errNoAnswer.
func DialAPIServer(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		ips, err = net.DefaultResolver.LookupHost(rctx, host)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	var errs []error
	for _, ip := range ips {
		start := time.Now()
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, noAnswer(ctx, err, time.Since(start)))
	}
	return nil, errors.Join(errs...)
}

// noAnswer turns a dial's timeout into a plain error, errNoAnswer when the
// attempt waited (most of) dialTimeout: an error such as EAGAIN may also
// call itself a timeout, and must not be retried at once.
func noAnswer(ctx context.Context, err error, took time.Duration) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || ctx.Err() != nil {
		return err
	}
	if took < dialTimeout/2 {
		return errors.New(err.Error())
	}
	return fmt.Errorf("%v: %w within %s", err, errNoAnswer, dialTimeout)
}

// refusals tells a refusal that lasts from one that passes. A kube-apiserver
// that has just started says ok on /readyz before its RBAC authorizer has
// caught up, and for a second or two refuses requests it allows a moment
// later: after a restart, the plugin's lists and watches are refused. An
// identity that had access before is refused for a while only: it is tried
// again every passingRetry, and not reported, for passingFor.
type refusals struct {
	granted atomic.Bool  // a request has been allowed since start
	since   atomic.Int64 // the first refusal since the last allowed request, in nanoseconds since epoch (monotonic); 0 while allowed
}

const (
	passingRetry = 200 * time.Millisecond
	passingFor   = 15 * time.Second
)

// allowed records an allowed request.
func (r *refusals) allowed() {
	r.granted.Store(true)
	r.since.Store(0)
}

// passing records a refusal and reports whether it is likely to pass: the
// identity had access before and has been refused for less than passingFor.
func (r *refusals) passing() bool {
	now := int64(time.Since(epoch))
	r.since.CompareAndSwap(0, now)
	return r.granted.Load() && time.Duration(now-r.since.Load()) < passingFor
}

// permission is what waitingOutErrors does when a group of watches is refused: a
// refusal likely to pass is retried every passingRetry, unreported; one that
// lasts is reported once, with denied, and retried every retry, until a
// request is allowed again, which granted reports.
type permission struct {
	refusals
	deniedNow atomic.Bool // a lasting refusal was reported, and nothing allowed since
	retry     time.Duration
	denied    func(err error)
	granted   func(what string)
	// starting, when set, reports that a refusal may be the API server's
	// authorizer catching up at start-up rather than a missing rule: it is
	// then retried every passingRetry, unreported.
	starting func() bool
}

// waitingOutErrors makes list and watch calls wait out an unreachable API server,
// retrying every retryEvery, instead of failing back to the informer, whose
// exponential backoff would grow to 30s during a long outage and delay the
// recovery by as much. A permission error is waited out as well, as access
// says, so that missing RBAC gives one clear log line rather than a stream
// of client-go's. Other errors the API server returns (404, 410) go to the
// informer at once. Each outage and its end are logged once.
func (c *Controller) waitingOutErrors(what string, access *permission, lw *toolscache.ListWatch) *toolscache.ListWatch {
	wait := func(ctx context.Context, err error) bool {
		if err == nil {
			access.allowed()
			c.answered.Store(int64(time.Since(epoch)))
			if c.apiDown.CompareAndSwap(true, false) {
				c.logf("the API server answers again")
			}
			if c.throttled.CompareAndSwap(true, false) {
				c.logf("the API server takes the plugin's requests again")
			}
			if access.deniedNow.CompareAndSwap(true, false) {
				access.granted(what)
			}
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		every := retryEvery
		var status apierrors.APIStatus
		switch {
		case (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && (access.passing() || access.starting != nil && access.starting()):
			every = passingRetry
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			if access.deniedNow.CompareAndSwap(false, true) {
				access.denied(err)
			}
			every = access.retry
		case apierrors.IsTooManyRequests(err):
			// client-go has already waited out ten Retry-Afters; the
			// reflector's own backoff would ignore the next one. Without
			// one, that backoff it is.
			d, ok := retryAfter(err)
			if !ok {
				return false
			}
			if c.throttled.CompareAndSwap(false, true) {
				c.cfg.Log.Warningf("the API server throttles the plugin's requests (429); waiting each Retry-After: %v", err)
			}
			every = d
		case errors.As(err, &status):
			return false
		default:
			// Attempts begun before the API server answered again may
			// still fail for a moment after: not a new outage.
			last := c.answered.Load()
			recent := last != 0 && time.Since(epoch)-time.Duration(last) < dialTimeout+retryEvery
			if !recent && c.apiDown.CompareAndSwap(false, true) {
				// Retried every retryEvery, or at once after a dial
				// that waited dialTimeout for an answer.
				c.cfg.Log.Warningf("cannot reach the API server; answering from what is known and retrying: %v", err)
			}
			if errors.Is(err, errNoAnswer) {
				every = 0 // the attempt waited dialTimeout already
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(every):
			return true
		}
	}
	return retrying(lw, wait)
}

// retryAfter is how long a 429 asks the client to wait, its Retry-After, at
// least retryEvery and at most maxRetryAfter; false when it names none.
func retryAfter(err error) (time.Duration, bool) {
	s, ok := apierrors.SuggestsClientDelay(err)
	if !ok || s <= 0 {
		return 0, false
	}
	return min(max(time.Duration(s)*time.Second, retryEvery), maxRetryAfter), true
}

// maxRetryAfter caps a Retry-After (API Priority and Fairness asks at most
// 32 s), so that a proxy asking for hours does not stall recovery.
const maxRetryAfter = time.Minute

// epoch is when the process started, for durations read off the monotonic
// clock: a wall clock stepped back must not silence the outage log.
var epoch = time.Now()

// retrying calls lw's list and watch again for as long as wait, which may
// sleep, says to after an error.
func retrying(lw *toolscache.ListWatch, wait func(context.Context, error) bool) *toolscache.ListWatch {
	list, watchF := lw.ListWithContextFunc, lw.WatchFuncWithContext
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			for {
				obj, err := list(ctx, o)
				if !wait(ctx, err) {
					return obj, err
				}
			}
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			for {
				w, err := watchF(ctx, o)
				if !wait(ctx, err) {
					return w, err
				}
			}
		},
	}
}
