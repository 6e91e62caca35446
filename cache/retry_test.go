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
		got := noAnswer(tc.ctx, tc.err)
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
	if noAnswer(context.Background(), nil) != nil {
		t.Error("no error became one")
	}
}

// A 429 that reaches the plugin (client-go gives up after ten) is retried
// after its Retry-After, not the reflector's shorter backoff.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want time.Duration
	}{
		{apierrors.NewTooManyRequests("throttled", 11), 11 * time.Second},
		{apierrors.NewTooManyRequests("throttled", 0), retryEvery},
		{apierrors.NewTooManyRequestsError("throttled"), retryEvery},
	} {
		if got := retryAfter(tc.err); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
