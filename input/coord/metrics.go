package coord

import "github.com/redpanda-data/benthos/v4/public/service"

// Metrics are the series a coordinator keeps, labelled by stream.
type Metrics struct {
	Commits        *service.MetricCounter
	CommitFailures *service.MetricCounter
	OwnedShards    *service.MetricGauge

	LeasesTaken      *service.MetricCounter // free or expired leases taken
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
		Commits:          m.NewCounter("kinesis_checkpoint_commits", "stream"),
		CommitFailures:   m.NewCounter("kinesis_checkpoint_failures", "stream"),
		OwnedShards:      m.NewGauge("kinesis_owned_shards", "stream"),
		LeasesTaken:      m.NewCounter("kinesis_leases_taken", "stream"),
		LeasesStolen:     m.NewCounter("kinesis_leases_stolen", "stream"),
		LeasesLost:       m.NewCounter("kinesis_leases_lost", "stream"),
		LeasesHandedOver: m.NewCounter("kinesis_leases_handed_over", "stream"),
		InstanceLoad:     m.NewGauge("kinesis_instance_bytes_per_second", "stream"),
		LeaseMoves:       m.NewCounter("kinesis_lease_moves", "stream", "cause"),
		RenewalFailures:  m.NewCounter("kinesis_lease_renewal_failures", "stream"),
		SinceRenewal:     m.NewGauge("kinesis_lease_renewal_age_ms", "stream"),

		BrokenCheckpoints: m.NewGauge("kinesis_broken_checkpoints", "stream"),
		ConfigMismatch:    m.NewGauge("kinesis_group_config_mismatch", "stream"),
	}
}
