package coord

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/internal/metricdef"
)

// Metrics are the series a coordinator keeps, labelled by stream.
type Metrics struct {
	Commits        *service.MetricCounter
	CommitFailures *service.MetricCounter
	OwnedShards    *service.MetricGauge

	LeasesTaken      *service.MetricCounter // free or expired leases taken
	LeaseScans       *service.MetricCounter // scans of the stream's lease items
	LeaseChangesRead *service.MetricCounter // lease items read alone, named by the change log
	LeasesStolen     *service.MetricCounter // leases asked of a live holder and received
	LeasesLost       *service.MetricCounter // held leases found taken by another instance
	LeasesHandedOver *service.MetricCounter // leases handed over after their last checkpoint
	InstanceLoad     *service.MetricGauge   // bytes a second this instance reads of a stream, as its lease meters measure
	// LeaseMoves counts the leases this instance came to hold, by cause:
	// free (never held, or released), expired (its holder stopped
	// renewing it), count or load (asked of a live holder to even out
	// the lease count or the measured load).
	LeaseMoves      *service.MetricCounter
	RenewalFailures *service.MetricCounter // lease writes that failed (not lost)
	SinceRenewal    *service.MetricGauge   // ms since the oldest held lease was last renewed

	// BrokenCheckpoints is the number of shards not read because what is
	// stored for them cannot be read from (see checkpoint.Checkpoint.Broken).
	BrokenCheckpoints *service.MetricGauge

	// ConfigMismatch is the number of live instances of this instance's
	// lease group that run another pipeline config.
	ConfigMismatch *service.MetricGauge
}

// NewMetrics registers the series with m.
func NewMetrics(m *service.Metrics) *Metrics {
	return &Metrics{
		Commits:          metricdef.Commits.Counter(m),
		CommitFailures:   metricdef.CommitFailures.Counter(m),
		OwnedShards:      metricdef.OwnedShards.Gauge(m),
		LeasesTaken:      metricdef.LeasesTaken.Counter(m),
		LeaseScans:       metricdef.LeaseScans.Counter(m),
		LeaseChangesRead: metricdef.LeaseChangesRead.Counter(m),
		LeasesStolen:     metricdef.LeasesStolen.Counter(m),
		LeasesLost:       metricdef.LeasesLost.Counter(m),
		LeasesHandedOver: metricdef.LeasesHandedOver.Counter(m),
		InstanceLoad:     metricdef.InstanceLoad.Gauge(m),
		LeaseMoves:       metricdef.LeaseMoves.Counter(m),
		RenewalFailures:  metricdef.RenewalFailures.Counter(m),
		SinceRenewal:     metricdef.RenewalAge.Gauge(m),

		BrokenCheckpoints: metricdef.BrokenCheckpoints.Gauge(m),
		ConfigMismatch:    metricdef.ConfigMismatch.Gauge(m),
	}
}
