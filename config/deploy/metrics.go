package deploy

// The binary's metrics, as the input defines them (internal/metricdef of
// the main module, whose test holds this list to that one: every metric is
// here, for a panel or a query of yours) and its Prometheus exporter serves
// them. This module cannot import the main one's: the main module's test
// (cmd/benthos-kinesis/dashboard_metrics_test.go) runs the binary and
// checks that every metric the generated dashboard and the autoscaling
// manifests name is on its /metrics.
var (
	// Reading, per stream and shard.
	recordsRead        = newCounter("kinesis_records_read", "stream", "shard")
	bytesRead          = newCounter("kinesis_bytes_read", "stream", "shard")
	millisBehind       = newGauge("kinesis_millis_behind_latest", "stream", "shard")
	streamMillisBehind = newGauge("kinesis_stream_millis_behind_latest", "stream")
	autoPlacement      = newGauge("kinesis_stream_auto_placement", "stream")
	throttles          = newCounter("kinesis_throttles", "stream", "shard")
	subscriptionErrors = newCounter("kinesis_subscription_errors", "stream", "shard", "class")
	shardStopped       = newGauge("kinesis_shard_stopped", "stream", "shard")
	subscriptions      = newCounter("kinesis_subscriptions", "stream", "shard")
	resubscriptions    = newCounter("kinesis_resubscriptions", "stream", "shard")
	outOfRange         = newCounter("kinesis_hash_key_out_of_range", "stream", "shard")
	endsUnconfirmed    = newCounter("kinesis_shard_ends_unconfirmed", "stream", "shard")
	checkpointsExpired = newCounter("kinesis_checkpoints_expired", "stream", "shard")

	// Acknowledgements and memory.
	pastCheckpoint = newGauge("kinesis_records_past_checkpoint", "stream", "shard")
	unacknowledged = newGauge("kinesis_records_unacknowledged", "stream", "shard")
	bytesInFlight  = newGauge("kinesis_bytes_in_flight")
	inFlightLimit  = newGauge("kinesis_bytes_in_flight_limit")

	// Checkpoints and leases, per stream.
	checkpointCommits  = newCounter("kinesis_checkpoint_commits", "stream")
	checkpointFailures = newCounter("kinesis_checkpoint_failures", "stream")
	brokenCheckpoints  = newGauge("kinesis_broken_checkpoints", "stream")
	ownedShards        = newGauge("kinesis_owned_shards", "stream")
	instanceLoad       = newGauge("kinesis_instance_bytes_per_second", "stream")
	leaseMoves         = newCounter("kinesis_lease_moves", "stream", "cause")
	leasesTaken        = newCounter("kinesis_leases_taken", "stream")
	leaseScans         = newCounter("kinesis_lease_scans", "stream")
	leaseChangesRead   = newCounter("kinesis_lease_changes_read", "stream")
	leasesStolen       = newCounter("kinesis_leases_stolen", "stream")
	leasesHandedOver   = newCounter("kinesis_leases_handed_over", "stream")
	leasesLost         = newCounter("kinesis_leases_lost", "stream")
	renewalFailures    = newCounter("kinesis_lease_renewal_failures", "stream")
	renewalAge         = newGauge("kinesis_lease_renewal_age_ms", "stream")
	configMismatch     = newGauge("kinesis_group_config_mismatch", "stream")

	// Calls to Kinesis and DynamoDB that failed, once each after the SDK's
	// retries.
	apiErrors = newCounter("kinesis_api_errors", "service", "operation", "class")

	// The process, from the exporter's process and Go collectors.
	residentMemory = newGauge("process_resident_memory_bytes")
	goMemLimit     = newGauge("go_gc_gomemlimit_bytes")
)
