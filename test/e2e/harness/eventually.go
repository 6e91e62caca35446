package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Eventually calls f until it returns nil and fails the test with f's last
// error when within has passed. A success that took longer than a second is
// logged, so slowness shows instead of hiding behind the deadline.
func Eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	if err := Poll(within, f); err != nil {
		t.Fatalf("still failing after %v: %v", within, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Logf("condition held after %.1fs", took.Seconds())
	}
}

// Poll calls f every 100 ms until it returns nil or within has passed, and
// returns f's last error then; for code that has no testing.TB.
func Poll(within time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return poll(ctx, 100*time.Millisecond, f)
}

// poll calls f every interval until it returns nil or ctx is done.
func poll(ctx context.Context, interval time.Duration, f func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if p := (permanent{}); errors.As(err, &p) {
			return p.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

type permanent struct{ error }

// Permanent wraps an error that no retry can cure: Eventually and Poll stop
// at once and report it.
func Permanent(err error) error { return permanent{err} }
