package cache

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A dial that timed out must not look like a timeout to client-go, which
// would turn the watch into an empty one and retry it with its own growing
// backoff, and must be known as errNoAnswer; other errors, and the caller's
// own deadline, pass unchanged.
func TestNoAnswer(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name                  string
		ctx                   context.Context
		err                   error
		wantTimeout, noAnswer bool
	}{
		{"attempt timed out", context.Background(), timeout, false, true},
		{"caller gave up", done, timeout, true, false},
		{"refused", context.Background(), refused, false, false},
	} {
		got := noAnswer(tc.ctx, tc.err, dialTimeout)
		var ne net.Error
		if isTimeout := errors.As(got, &ne) && ne.Timeout(); isTimeout != tc.wantTimeout {
			t.Errorf("%s: %v is a timeout: %t, want %t", tc.name, got, isTimeout, tc.wantTimeout)
		}
		if errors.Is(got, errNoAnswer) != tc.noAnswer {
			t.Errorf("%s: %v is errNoAnswer: %t, want %t", tc.name, got, !tc.noAnswer, tc.noAnswer)
		}
		if got == nil || !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("%s: %v lost the dial's error %v", tc.name, got, tc.err)
		}
	}
	if noAnswer(context.Background(), nil, dialTimeout) != nil {
		t.Error("no error became one")
	}
}

// A 429 that reaches the plugin (client-go gives up after ten) is retried
// after its Retry-After, capped, not the reflector's shorter backoff; one
// without a Retry-After goes back to that backoff.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want time.Duration
		ok   bool
	}{
		{apierrors.NewTooManyRequests("throttled", 11), 11 * time.Second, true},
		{apierrors.NewTooManyRequests("throttled", 7200), maxRetryAfter, true},
		{apierrors.NewTooManyRequests("throttled", 0), 0, false},
		{apierrors.NewTooManyRequestsError("throttled"), 0, false},
	} {
		if got, ok := retryAfter(tc.err); got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%v) = %v, %t, want %v, %t", tc.err, got, ok, tc.want, tc.ok)
		}
	}
}

// A timeout that came at once (EAGAIN calls itself one) is a plain error,
// not errNoAnswer, so that it is not retried at once.
func TestNoAnswerNeedsTheWait(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	got := noAnswer(context.Background(), timeout, time.Millisecond)
	var ne net.Error
	if errors.Is(got, errNoAnswer) || errors.As(got, &ne) {
		t.Errorf("an instant timeout became %#v", got)
	}
}

// Each address of a host name is tried, each with its own dialTimeout: a
// first address that fails does not hide the second.
func TestDialTriesEveryAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	// localhost resolves to ::1 and 127.0.0.1 here, or to 127.0.0.1 only:
	// either way the listener on 127.0.0.1 must be reached.
	c, err := DialAPIServer(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("dial localhost:%s: %v", port, err)
	}
	c.Close()
}
