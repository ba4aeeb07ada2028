package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgapi/msgapi/events/loki"
)

// lokiCollector reads the shipper's counters at scrape time, so the shipper
// keeps plain atomics and knows nothing of Prometheus.
type lokiCollector struct {
	dropped, queued, queuedBytes, truncated *prometheus.Desc

	mu    sync.Mutex
	stats func() loki.Stats
}

func (c *lokiCollector) set(f func() loki.Stats) {
	c.mu.Lock()
	c.stats = f
	c.mu.Unlock()
}

func (c *lokiCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dropped
	ch <- c.queued
	ch <- c.queuedBytes
	ch <- c.truncated
}

func (c *lokiCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.stats
	c.mu.Unlock()
	var s loki.Stats
	if f != nil {
		s = f()
	}
	for reason, n := range map[string]uint64{"queue_full": s.QueueFull, "push_failed": s.PushFailed, "shutdown": s.Shutdown} {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.queuedBytes, prometheus.GaugeValue, float64(s.QueuedBytes))
	ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.CounterValue, float64(s.Truncated))
}
