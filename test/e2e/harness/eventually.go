package harness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often Eventually and Poll retry.
const PollInterval = 100 * time.Millisecond

// Eventually calls f until it returns nil and fails the test with f's last
// error when within has passed. A success that took longer than a second is
// logged, so slowness shows instead of hiding behind the deadline.
func Eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := pollUntil(ctx, f); err != nil {
		t.Fatalf("still failing after %v: %v", within, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Logf("condition held after %.1fs", took.Seconds())
	}
}

// Poll calls f until it returns nil or within has passed, and returns f's
// last error then; for code that has no testing.TB.
func Poll(within time.Duration, f func() error) error { return pollEvery(within, PollInterval, f) }

func pollEvery(within, interval time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return pollUntilEvery(ctx, interval, f)
}

func pollUntil(ctx context.Context, f func() error) error {
	return pollUntilEvery(ctx, PollInterval, f)
}

func pollUntilEvery(ctx context.Context, interval time.Duration, f func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
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
