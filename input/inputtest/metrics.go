package inputtest

import (
	"context"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Metrics keeps the counters and gauges of one test pipeline in memory
// (StartPipelineWith): a Benthos metrics exporter that tests can read.
type Metrics struct {
	mu     sync.Mutex
	series []*series
}

type series struct {
	name   string
	labels map[string]string
	value  int64
	peak   int64 // the highest value it ever had
}

// Counter returns the sum of the counter (or gauge) name over every series
// whose labels include the given key-value pairs, e.g.
// Counter("kinesis_throttles", "stream", "orders"). Benthos may add labels of
// its own; they do not matter.
func (m *Metrics) Counter(name string, labelPairs ...string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum int64
	for _, s := range m.series {
		if s.name != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if s.labels[labelPairs[i]] != labelPairs[i+1] {
				match = false
				break
			}
		}
		if match {
			sum += s.value
		}
	}
	return sum
}

// Peak returns the highest value a gauge (or counter) without labels of
// its own ever had; 0 when it was never set.
func (m *Metrics) Peak(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var peak int64
	for _, s := range m.series {
		if s.name == name {
			peak = max(peak, s.peak)
		}
	}
	return peak
}

// register adds the exporter to env under name.
func (m *Metrics) register(env *service.Environment, name string) error {
	return env.RegisterMetricsExporter(name, service.NewConfigSpec(), func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
		return exporter{m}, nil
	})
}

// find returns the series of name with the labels, creating it.
func (m *Metrics) find(name string, keys, values []string) *series {
	labels := make(map[string]string, len(keys))
	for i, k := range keys {
		if i < len(values) {
			labels[k] = values[i]
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.series {
		if s.name == name && sameLabels(s.labels, labels) {
			return s
		}
	}
	s := &series{name: name, labels: labels}
	m.series = append(m.series, s)
	return s
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

type exporter struct{ m *Metrics }

func (e exporter) NewCounterCtor(name string, keys ...string) service.MetricsExporterCounterCtor {
	return func(values ...string) service.MetricsExporterCounter {
		return value{e.m, e.m.find(name, keys, values)}
	}
}

func (e exporter) NewGaugeCtor(name string, keys ...string) service.MetricsExporterGaugeCtor {
	return func(values ...string) service.MetricsExporterGauge {
		return value{e.m, e.m.find(name, keys, values)}
	}
}

func (e exporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return noTimer{} }
}

func (exporter) Close(context.Context) error { return nil }

// value is a counter or a gauge.
type value struct {
	m *Metrics
	s *series
}

func (v value) Incr(n int64) {
	v.m.mu.Lock()
	v.s.value += n
	v.s.peak = max(v.s.peak, v.s.value)
	v.m.mu.Unlock()
}

func (v value) Set(n int64) {
	v.m.mu.Lock()
	v.s.value = n
	v.s.peak = max(v.s.peak, n)
	v.m.mu.Unlock()
}

type noTimer struct{}

func (noTimer) Timing(int64) {}
