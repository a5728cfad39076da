package input

import (
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
)

// metrics are the input's own metrics; Benthos adds its input_* ones.
type metrics struct {
	recordsRead    *service.MetricCounter // stream, shard
	bytesRead      *service.MetricCounter // stream, shard
	millisBehind   *service.MetricGauge   // stream, shard
	throttles      *service.MetricCounter // stream, shard
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
	// stopped is 1 while a shard is not read because its position is wrong.
	stopped *service.MetricGauge // stream, shard
	// endsUnconfirmed counts shard ends a read reported on a shard that
	// ListShards lists open (not taken: the shard is read on).
	endsUnconfirmed *service.MetricCounter // stream, shard
	// bytesInFlight is what the records read and not yet acknowledged, and
	// those being read, hold against memory_limit.
	bytesInFlight *service.MetricGauge
	// bytesInFlightLimit is what they may hold: the records' part of
	// memory_limit, less what the shards read hold of their own.
	bytesInFlightLimit *service.MetricGauge
	// apiErrors counts the Kinesis and DynamoDB calls that failed, once
	// each (after the AWS SDK's retries), by service, operation and class
	// (awserr.Class: throttled, recoverable, retryable, fatal).
	apiErrors *service.MetricCounter // service, operation, class

	// coord are the coordinators' series: commits, owned shards, leases.
	coord *coord.Metrics
}

// apiError counts a failed call (awsclient.OnError); calls canceled by the
// input itself (a reader stopping) are no errors.
func (m *metrics) apiError(service, operation string, err error) {
	class := awserr.Classify(err)
	if class == awserr.Canceled {
		return
	}
	m.apiErrors.Incr(1, strings.ToLower(service), operation, class.String())
}

func newMetrics(m *service.Metrics) *metrics {
	return &metrics{
		recordsRead:        m.NewCounter("kinesis_records_read", "stream", "shard"),
		bytesRead:          m.NewCounter("kinesis_bytes_read", "stream", "shard"),
		millisBehind:       m.NewGauge("kinesis_millis_behind_latest", "stream", "shard"),
		throttles:          m.NewCounter("kinesis_throttles", "stream", "shard"),
		subscriptions:      m.NewCounter("kinesis_subscriptions", "stream", "shard"),
		resubscribes:       m.NewCounter("kinesis_resubscriptions", "stream", "shard"),
		subscribeErrs:      m.NewCounter("kinesis_subscription_errors", "stream", "shard", "class"),
		outOfRange:         m.NewCounter("kinesis_hash_key_out_of_range", "stream", "shard"),
		pastCheckpoint:     m.NewGauge("kinesis_records_past_checkpoint", "stream", "shard"),
		unacknowledged:     m.NewGauge("kinesis_records_unacknowledged", "stream", "shard"),
		streamBehind:       m.NewGauge("kinesis_stream_millis_behind_latest", "stream"),
		expired:            m.NewCounter("kinesis_checkpoints_expired", "stream", "shard"),
		stopped:            m.NewGauge("kinesis_shard_stopped", "stream", "shard"),
		endsUnconfirmed:    m.NewCounter("kinesis_shard_ends_unconfirmed", "stream", "shard"),
		bytesInFlight:      m.NewGauge("kinesis_bytes_in_flight"),
		bytesInFlightLimit: m.NewGauge("kinesis_bytes_in_flight_limit"),
		apiErrors:          m.NewCounter("kinesis_api_errors", "service", "operation", "class"),
		coord:              coord.NewMetrics(m),
	}
}
