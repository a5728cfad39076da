package read

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/internal/metricdef"
)

// Metrics are the readers' series (internal/metricdef names and documents
// each); every one but Coord's is labelled by stream and shard.
type Metrics struct {
	recordsRead, bytesRead     *service.MetricCounter
	outOfRange                 *service.MetricCounter
	millisBehind, streamBehind *service.MetricGauge // streamBehind: by stream only, the most of its shards
	autoPlacement              *service.MetricGauge // by stream only
	pastCheckpoint             *service.MetricGauge
	unacknowledged             *service.MetricGauge // records handed out, not yet acknowledged
	// expired counts starts refused because their record passed the
	// retention period (the shard is then read from TRIM_HORIZON).
	expired *service.MetricCounter
	// stopped is 1 while a shard is not read because its position is wrong.
	stopped *service.MetricGauge
	// endsUnconfirmed counts shard ends a read reported on a shard that
	// ListShards lists open (not taken: the shard is read on).
	endsUnconfirmed *service.MetricCounter
	// Coord are the coordinators' series: commits, owned shards, leases.
	Coord *coord.Metrics
}

// NewMetrics registers the readers' series.
func NewMetrics(m *service.Metrics) *Metrics {
	return &Metrics{
		recordsRead:     metricdef.RecordsRead.Counter(m),
		bytesRead:       metricdef.BytesRead.Counter(m),
		outOfRange:      metricdef.OutOfRange.Counter(m),
		millisBehind:    metricdef.MillisBehind.Gauge(m),
		streamBehind:    metricdef.StreamBehind.Gauge(m),
		autoPlacement:   metricdef.AutoPlacement.Gauge(m),
		pastCheckpoint:  metricdef.PastCheckpoint.Gauge(m),
		unacknowledged:  metricdef.Unacknowledged.Gauge(m),
		expired:         metricdef.Expired.Counter(m),
		stopped:         metricdef.Stopped.Gauge(m),
		endsUnconfirmed: metricdef.EndsUnconfirmed.Counter(m),
		Coord:           coord.NewMetrics(m),
	}
}
