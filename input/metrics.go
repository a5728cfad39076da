package input

import (
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/metricdef"
)

// metrics are the input's own metrics; Benthos adds its input_* ones.
type metrics struct {
	// read are the readers' series, by stream and shard.
	read *read.Metrics

	throttles     *service.MetricCounter // stream, shard
	subscriptions *service.MetricCounter // stream, shard
	resubscribes  *service.MetricCounter // stream, shard
	subscribeErrs *service.MetricCounter // stream, shard, class
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
		read:               read.NewMetrics(m),
		throttles:          metricdef.Throttles.Counter(m),
		subscriptions:      metricdef.Subscriptions.Counter(m),
		resubscribes:       metricdef.Resubscriptions.Counter(m),
		subscribeErrs:      metricdef.SubscribeErrors.Counter(m),
		bytesInFlight:      metricdef.BytesInFlight.Gauge(m),
		bytesInFlightLimit: metricdef.InFlightLimit.Gauge(m),
		apiErrors:          metricdef.APIErrors.Counter(m),
	}
}
