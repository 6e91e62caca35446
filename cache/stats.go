package cache

import "time"

// The SOA serial, and the counts of what the answers hold, for the metrics.

// Stats counts what the answers hold.
type Stats struct {
	Imports   map[string]int // services answered, by ServiceImport version
	Endpoints int            // ready headless endpoint names
	// EndpointsByCluster are the ready headless endpoint names answered, by
	// source cluster: only clusters with some, at most MaxClusterSeries
	// (the rest under OtherClusters). They add up to Endpoints.
	EndpointsByCluster map[string]int
	// ClusterChanged is when an EndpointSlice of each source cluster was
	// last seen added, changed or deleted (by this process: its first list
	// counts as a change): only clusters with slices in the namespaces
	// answered, at most MaxClusterSeries (the rest, under OtherClusters, at
	// the latest of their times).
	ClusterChanged map[string]time.Time
}

// Serial is the SOA serial: it moves forward whenever an answer changes.
func (c *Controller) Serial() uint32 { return c.serial.Load() }

// publishStatsIfSynced publishes the counts once the first build is done,
// which publishes them once, at its end.
func (c *Controller) publishStatsIfSynced() {
	if c.synced.Load() {
		c.publishStats()
	}
}

// bumpSerial moves the serial forward: to now, in seconds, or by one when
// it is there already.
func (c *Controller) bumpSerial() {
	for {
		old := c.serial.Load()
		next := max(old+1, uint32(time.Now().Unix()))
		if c.serial.CompareAndSwap(old, next) {
			return
		}
	}
}

// account adds d times s to the counts.
func (c *Controller) account(s *Service, d int) {
	if s == nil {
		return
	}
	c.statsMu.Lock()
	c.imports[s.Version()] += d
	c.endpoints += d * s.Endpoints()
	c.accountClusters(s, d)
	c.statsMu.Unlock()
}

// publishStats hands the counts to OnStats, one call at a time: sync and
// the EndpointSlice informer's handler (sliceChanged) both publish, and a
// count taken first is handed over first.
func (c *Controller) publishStats() {
	if c.cfg.OnStats == nil {
		return
	}
	c.why.pubMu.Lock()
	defer c.why.pubMu.Unlock()
	c.statsMu.Lock()
	st := Stats{Imports: map[string]int{}, Endpoints: c.endpoints}
	for _, v := range Versions {
		st.Imports[v] = c.imports[v]
	}
	c.clusterStats(&st)
	c.statsMu.Unlock()
	c.cfg.OnStats(st)
}
