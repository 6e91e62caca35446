package multicluster

import (
	"context"
	"time"

	"github.com/coredns/coredns/plugin/transfer"
)

// Secondaries follow the zone through NOTIFY (RFC 1996): when the serial
// moves, the transfer plugin, if the server block has one, is told to send
// one to its `to` addresses for every zone of the plugin. However many
// objects change, a zone is notified at most once per notifyGap: a
// secondary that asks at once gets every change made until then, and the
// next NOTIFY covers the rest.
const (
	notifyGap   = time.Second
	notifyCheck = 100 * time.Millisecond // how often the serial is looked at
)

// notifier is what sends NOTIFYs: the transfer plugin.
type notifier interface {
	Notify(zone string) error
}

var _ notifier = (*transfer.Transfer)(nil)

// notifyOnChange sends NOTIFY for every zone once the first answers are
// built, then whenever the serial moves, at most once per notifyGap, until
// ctx ends.
func (m *Multicluster) notifyOnChange(ctx context.Context, n notifier) {
	tick := time.NewTicker(notifyCheck)
	defer tick.Stop()
	var sent uint32
	var at time.Time
	failing := map[string]bool{} // zones whose last NOTIFY failed: said once, until one succeeds
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if m.backend == nil || !m.backend.HasSynced() {
			continue
		}
		serial := m.backend.Serial()
		if !at.IsZero() && (serial == sent || time.Since(at) < notifyGap) {
			continue
		}
		sent, at = serial, time.Now()
		for _, z := range m.Zones {
			switch err := n.Notify(z); {
			case err != nil && !failing[z]:
				failing[z] = true
				log.Warningf("NOTIFY for %s (serial %d): %v; said again only after one succeeds", z, serial, err)
			case err == nil && failing[z]:
				delete(failing, z)
				log.Infof("NOTIFY for %s (serial %d) accepted again", z, serial)
			}
		}
	}
}
