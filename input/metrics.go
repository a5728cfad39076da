package input

import "github.com/redpanda-data/benthos/v4/public/service"

// metrics are the input's own metrics; Benthos adds its input_* ones.
type metrics struct {
	recordsRead    *service.MetricCounter // stream, shard
	bytesRead      *service.MetricCounter // stream, shard
	millisBehind   *service.MetricGauge   // stream, shard
	throttles      *service.MetricCounter // stream, shard
	commits        *service.MetricCounter // stream
	commitFailures *service.MetricCounter // stream
	ownedShards    *service.MetricGauge   // stream
	subscriptions  *service.MetricCounter // stream, shard
	resubscribes   *service.MetricCounter // stream, shard
	subscribeErrs  *service.MetricCounter // stream, shard, class
	outOfRange     *service.MetricCounter // stream, shard
	pastCheckpoint *service.MetricGauge   // stream, shard
	unacknowledged *service.MetricGauge   // stream, shard: records handed out, not yet acknowledged
	// streamBehind is the most millis behind latest over a stream's shards.
	streamBehind *service.MetricGauge // stream
	// expired counts starts refused because their record passed the
	// retention period (the shard is then read from TRIM_HORIZON).
	expired *service.MetricCounter // stream, shard

	// Lease table (checkpoint.dynamodb).
	leasesTaken      *service.MetricCounter // stream: free or expired leases taken
	leasesStolen     *service.MetricCounter // stream: leases asked of a live holder and received
	leasesLost       *service.MetricCounter // stream: held leases found taken by another instance
	leasesHandedOver *service.MetricCounter // stream: leases handed over after their last checkpoint
	renewalFailures  *service.MetricCounter // stream: lease writes that failed (not lost)
	sinceRenewal     *service.MetricGauge   // stream: ms since the oldest held lease was last renewed
}

func newMetrics(m *service.Metrics) *metrics {
	return &metrics{
		recordsRead:    m.NewCounter("kinesis_records_read", "stream", "shard"),
		bytesRead:      m.NewCounter("kinesis_bytes_read", "stream", "shard"),
		millisBehind:   m.NewGauge("kinesis_millis_behind_latest", "stream", "shard"),
		throttles:      m.NewCounter("kinesis_throttles", "stream", "shard"),
		commits:        m.NewCounter("kinesis_checkpoint_commits", "stream"),
		commitFailures: m.NewCounter("kinesis_checkpoint_failures", "stream"),
		ownedShards:    m.NewGauge("kinesis_owned_shards", "stream"),
		subscriptions:  m.NewCounter("kinesis_subscriptions", "stream", "shard"),
		resubscribes:   m.NewCounter("kinesis_resubscriptions", "stream", "shard"),
		subscribeErrs:  m.NewCounter("kinesis_subscription_errors", "stream", "shard", "class"),
		outOfRange:     m.NewCounter("kinesis_hash_key_out_of_range", "stream", "shard"),
		pastCheckpoint: m.NewGauge("kinesis_records_past_checkpoint", "stream", "shard"),
		unacknowledged: m.NewGauge("kinesis_records_unacknowledged", "stream", "shard"),
		streamBehind:   m.NewGauge("kinesis_stream_millis_behind_latest", "stream"),
		expired:        m.NewCounter("kinesis_checkpoints_expired", "stream", "shard"),

		leasesTaken:      m.NewCounter("kinesis_leases_taken", "stream"),
		leasesStolen:     m.NewCounter("kinesis_leases_stolen", "stream"),
		leasesLost:       m.NewCounter("kinesis_leases_lost", "stream"),
		leasesHandedOver: m.NewCounter("kinesis_leases_handed_over", "stream"),
		renewalFailures:  m.NewCounter("kinesis_lease_renewal_failures", "stream"),
		sinceRenewal:     m.NewGauge("kinesis_lease_renewal_age_ms", "stream"),
	}
}
