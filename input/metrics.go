package input

import (
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/metricdef"
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
		recordsRead:        metricdef.RecordsRead.Counter(m),
		bytesRead:          metricdef.BytesRead.Counter(m),
		millisBehind:       metricdef.MillisBehind.Gauge(m),
		throttles:          metricdef.Throttles.Counter(m),
		subscriptions:      metricdef.Subscriptions.Counter(m),
		resubscribes:       metricdef.Resubscriptions.Counter(m),
		subscribeErrs:      metricdef.SubscribeErrors.Counter(m),
		outOfRange:         metricdef.OutOfRange.Counter(m),
		pastCheckpoint:     metricdef.PastCheckpoint.Gauge(m),
		unacknowledged:     metricdef.Unacknowledged.Gauge(m),
		streamBehind:       metricdef.StreamBehind.Gauge(m),
		expired:            metricdef.Expired.Counter(m),
		stopped:            metricdef.Stopped.Gauge(m),
		endsUnconfirmed:    metricdef.EndsUnconfirmed.Counter(m),
		bytesInFlight:      metricdef.BytesInFlight.Gauge(m),
		bytesInFlightLimit: metricdef.InFlightLimit.Gauge(m),
		apiErrors:          metricdef.APIErrors.Counter(m),
		coord:              coord.NewMetrics(m),
	}
}
