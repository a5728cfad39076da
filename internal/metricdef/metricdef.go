// Package metricdef defines each of the input's metrics once: its name,
// kind, labels and what it counts. The input registers its metrics from
// here (Counter, Gauge), the config spec's documentation lists them from
// here (Markdown), and a test holds the README and the dashboard module
// (config/deploy) to the same list: a metric added here and missing from
// any of them fails it.
package metricdef

import (
	"fmt"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Kind is a metric's kind, as Prometheus names it.
type Kind string

const (
	KindCounter Kind = "counter"
	KindGauge   Kind = "gauge"
)

// Metric is one of the input's metrics.
type Metric struct {
	Name   string
	Kind   Kind
	Labels []string
	// Help says what it counts, after its kind and labels: a phrase that
	// starts in lower case, without a final full stop.
	Help string
}

var all []Metric

func define(name string, kind Kind, help string, labels ...string) Metric {
	m := Metric{Name: name, Kind: kind, Labels: labels, Help: help}
	all = append(all, m)
	return m
}

// All returns every metric, in the order of the list below.
func All() []Metric { return append([]Metric(nil), all...) }

// The metrics, by what they tell.
var (
	// Reading, per stream and shard.
	RecordsRead     = define("kinesis_records_read", KindCounter, "Kinesis records read (an aggregate counts once, when all of its user records are out)", "stream", "shard")
	BytesRead       = define("kinesis_bytes_read", KindCounter, "bytes of Kinesis record data read", "stream", "shard")
	MillisBehind    = define("kinesis_millis_behind_latest", KindGauge, "how far the shard's last read was behind its tip", "stream", "shard")
	StreamBehind    = define("kinesis_stream_millis_behind_latest", KindGauge, "the most behind of the stream's shards", "stream")
	AutoPlacement   = define("kinesis_stream_auto_placement", KindGauge, "1 while the stream places records itself (record distribution AUTO: no order per partition key, aggregates' user records not checked against their shard's range), 0 while partition keys place them", "stream")
	Throttles       = define("kinesis_throttles", KindCounter, "GetRecords calls Kinesis throttled (polling)", "stream", "shard")
	Subscriptions   = define("kinesis_subscriptions", KindCounter, "fan-out subscriptions opened, the first of each read of a shard (a reader started, a lease taken)", "stream", "shard")
	Resubscriptions = define("kinesis_resubscriptions", KindCounter, "fan-out subscriptions renewed (each ends after 5 minutes, or on an error)", "stream", "shard")
	SubscribeErrors = define("kinesis_subscription_errors", KindCounter, "fan-out subscriptions that failed, by class (recoverable, throttled, retryable, fatal)", "stream", "shard", "class")
	OutOfRange      = define("kinesis_hash_key_out_of_range", KindCounter, "user records of aggregates whose hash key lies outside their shard's range (delivered, flagged)", "stream", "shard")
	EndsUnconfirmed = define("kinesis_shard_ends_unconfirmed", KindCounter, "shard ends a read reported that ListShards did not confirm (the shard was read on)", "stream", "shard")
	Expired         = define("kinesis_checkpoints_expired", KindCounter, "checkpoints found older than the retention period (reading went on from the oldest record left)", "stream", "shard")
	Stopped         = define("kinesis_shard_stopped", KindGauge, "1 while the shard is not read because its checkpoint is a position the shard cannot hold", "stream", "shard")

	// Acknowledgements and memory.
	PastCheckpoint = define("kinesis_records_past_checkpoint", KindGauge, "records read past the shard's checkpoint, all of which a restart would read again; a finished shard's go to zero", "stream", "shard")
	Unacknowledged = define("kinesis_records_unacknowledged", KindGauge, "records handed to the pipeline and not yet acknowledged (stuck at checkpoint.limit: the shard waits on the output)", "stream", "shard")
	BytesInFlight  = define("kinesis_bytes_in_flight", KindGauge, "what the records read and not yet acknowledged, and those being read, hold of memory_limit")
	InFlightLimit  = define("kinesis_bytes_in_flight_limit", KindGauge, "what they may hold: the records' part of memory_limit, less what the shards read hold of their own")

	// Checkpoints and leases, per stream.
	Commits           = define("kinesis_checkpoint_commits", KindCounter, "checkpoint commits that stored something", "stream")
	CommitFailures    = define("kinesis_checkpoint_failures", KindCounter, "checkpoint commits that failed", "stream")
	BrokenCheckpoints = define("kinesis_broken_checkpoints", KindGauge, "shards not read because what is stored for them cannot be read (a malformed checkpoint file entry or lease item, an end stored for a shard listed open)", "stream")
	OwnedShards       = define("kinesis_owned_shards", KindGauge, "the shards this instance reads: with a lease table, the leases it holds (read, fenced or being handed over); without, the stream's shards not finished", "stream")
	InstanceLoad      = define("kinesis_instance_bytes_per_second", KindGauge, "with a lease table: the bytes a second written to the shards this instance holds, as its leases' meters measure (what balancing by throughput weighs)", "stream")
	LeaseMoves        = define("kinesis_lease_moves", KindCounter, "leases this instance came to hold, by cause: free, expired, count or load (asked of a live holder to even out the count or the load)", "stream", "cause")
	LeasesTaken       = define("kinesis_leases_taken", KindCounter, "free or expired leases taken", "stream")
	LeasesStolen      = define("kinesis_leases_stolen", KindCounter, "leases asked of a live holder and received", "stream")
	LeasesHandedOver  = define("kinesis_leases_handed_over", KindCounter, "leases handed over to an instance that asked (after their last checkpoint, or before every record was acknowledged when none came within a lease period)", "stream")
	LeasesLost        = define("kinesis_leases_lost", KindCounter, "held leases found taken by another instance (or freed or overwritten by hand)", "stream")
	LeaseScans        = define("kinesis_lease_scans", KindCounter, "scans of the stream's items in the lease table: at the start, every 30 lease periods, and when owners changed that the stream's change log does not name, or more than a sixteenth of the shards (each instance otherwise reads only the stream's roster, change counter and log)", "stream")
	LeaseChangesRead  = define("kinesis_lease_changes_read", KindCounter, "items of the lease table read alone because the stream's change log named their owner changed (rather than a scan of the stream's items)", "stream")
	RenewalFailures   = define("kinesis_lease_renewal_failures", KindCounter, "lease writes that failed (the lease was not lost)", "stream")
	RenewalAge        = define("kinesis_lease_renewal_age_ms", KindGauge, "milliseconds since the oldest held lease was last renewed", "stream")
	ConfigMismatch    = define("kinesis_group_config_mismatch", KindGauge, "live instances of the lease group that run another pipeline config", "stream")

	// Calls.
	APIErrors = define("kinesis_api_errors", KindCounter, "calls to Kinesis and DynamoDB that failed, once each after the AWS SDK's retries, by service, operation and class (throttled, recoverable, retryable, fatal)", "service", "operation", "class")
)

// Counter registers m, a counter, with ms.
func (m Metric) Counter(ms *service.Metrics) *service.MetricCounter {
	m.must(KindCounter)
	return ms.NewCounter(m.Name, m.Labels...)
}

// Gauge registers m, a gauge, with ms.
func (m Metric) Gauge(ms *service.Metrics) *service.MetricGauge {
	m.must(KindGauge)
	return ms.NewGauge(m.Name, m.Labels...)
}

func (m Metric) must(k Kind) {
	if m.Kind != k {
		panic(fmt.Sprintf("metricdef: %s is a %s, registered as a %s", m.Name, m.Kind, k))
	}
}

// Markdown lists every metric as the config spec's documentation does: one
// item each, its name, kind, labels and what it counts.
func Markdown() string {
	var b strings.Builder
	for _, m := range all {
		per := "per instance"
		if len(m.Labels) > 0 {
			per = "per " + strings.Join(m.Labels, ", ")
		}
		fmt.Fprintf(&b, "- %s: %s %s: %s\n", m.Name, m.Kind, per, m.Help)
	}
	return b.String()
}
