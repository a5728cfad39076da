// Package promexport is a Benthos metrics exporter named prometheus: every
// Benthos and input metric as Prometheus text on the HTTP server's /metrics
// (and /stats). Registered under that name, it is Benthos' default metrics
// exporter, so a binary that imports this package serves /metrics without any
// metrics config.
package promexport

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redpanda-data/benthos/v4/public/service"
)

const (
	fPrefix         = "prefix"
	fProcessMetrics = "add_process_metrics"
	fGoMetrics      = "add_go_metrics"
)

// Spec is the exporter's config spec.
func Spec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Stable().
		Summary("Serves every metric as Prometheus text on the HTTP server's `/metrics` endpoint, to be scraped.").
		Description("Counters and gauges keep their Benthos names and labels (characters Prometheus does not allow become `_`); timers are histograms in seconds. The HTTP server (`http.address`, `0.0.0.0:4195` by default) must be enabled.").
		Fields(
			service.NewStringField(fPrefix).Description("A prefix for every metric name, e.g. `benthos_`.").Default(""),
			service.NewBoolField(fProcessMetrics).Description("Also export the process's CPU, memory and file descriptors (`process_*`).").Default(true),
			service.NewBoolField(fGoMetrics).Description("Also export the Go runtime's metrics (`go_*`).").Default(true),
		)
}

func init() {
	err := service.RegisterMetricsExporter("prometheus", Spec(), func(conf *service.ParsedConfig, log *service.Logger) (service.MetricsExporter, error) {
		return New(conf, log)
	})
	if err != nil {
		panic(err)
	}
}

// Exporter implements service.MetricsExporter with a Prometheus registry.
type Exporter struct {
	reg    *prometheus.Registry
	prefix string
	log    *service.Logger

	mu       sync.Mutex
	counters map[string]*prometheus.CounterVec
	gauges   map[string]*prometheus.GaugeVec
	timers   map[string]*prometheus.HistogramVec
	refused  map[string]bool // names that could not be registered, warned once
}

// New builds an exporter from its parsed config.
func New(conf *service.ParsedConfig, log *service.Logger) (*Exporter, error) {
	e := &Exporter{
		reg: prometheus.NewRegistry(), log: log,
		counters: map[string]*prometheus.CounterVec{}, gauges: map[string]*prometheus.GaugeVec{},
		timers: map[string]*prometheus.HistogramVec{}, refused: map[string]bool{},
	}
	var err error
	if e.prefix, err = conf.FieldString(fPrefix); err != nil {
		return nil, err
	}
	process, err := conf.FieldBool(fProcessMetrics)
	if err != nil {
		return nil, err
	}
	goMetrics, err := conf.FieldBool(fGoMetrics)
	if err != nil {
		return nil, err
	}
	if process {
		e.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if goMetrics {
		e.reg.MustRegister(collectors.NewGoCollector())
	}
	return e, nil
}

// HandlerFunc serves the metrics; Benthos mounts it on /metrics and /stats.
func (e *Exporter) HandlerFunc() http.HandlerFunc {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}).ServeHTTP
}

// Close implements service.MetricsExporter.
func (e *Exporter) Close(context.Context) error { return nil }

// NewCounterCtor implements service.MetricsExporter.
func (e *Exporter) NewCounterCtor(name string, labelKeys ...string) service.MetricsExporterCounterCtor {
	name, keys := e.name(name), cleanLabels(labelKeys)
	e.mu.Lock()
	defer e.mu.Unlock()
	vec, ok := e.counters[name]
	if !ok {
		vec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "Benthos counter " + name}, keys)
		if !e.register(name, vec) {
			return func(...string) service.MetricsExporterCounter { return nop{} }
		}
		e.counters[name] = vec
	}
	return func(values ...string) service.MetricsExporterCounter {
		c, err := vec.GetMetricWithLabelValues(values...)
		if err != nil {
			return nop{}
		}
		return counter{c}
	}
}

// NewGaugeCtor implements service.MetricsExporter.
func (e *Exporter) NewGaugeCtor(name string, labelKeys ...string) service.MetricsExporterGaugeCtor {
	name, keys := e.name(name), cleanLabels(labelKeys)
	e.mu.Lock()
	defer e.mu.Unlock()
	vec, ok := e.gauges[name]
	if !ok {
		vec = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Benthos gauge " + name}, keys)
		if !e.register(name, vec) {
			return func(...string) service.MetricsExporterGauge { return nop{} }
		}
		e.gauges[name] = vec
	}
	return func(values ...string) service.MetricsExporterGauge {
		g, err := vec.GetMetricWithLabelValues(values...)
		if err != nil {
			return nop{}
		}
		return gauge{g}
	}
}

// NewTimerCtor implements service.MetricsExporter: a histogram in seconds.
func (e *Exporter) NewTimerCtor(name string, labelKeys ...string) service.MetricsExporterTimerCtor {
	name, keys := e.name(name), cleanLabels(labelKeys)
	e.mu.Lock()
	defer e.mu.Unlock()
	vec, ok := e.timers[name]
	if !ok {
		vec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: "Benthos timer " + name + " in seconds",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10},
		}, keys)
		if !e.register(name, vec) {
			return func(...string) service.MetricsExporterTimer { return nop{} }
		}
		e.timers[name] = vec
	}
	return func(values ...string) service.MetricsExporterTimer {
		o, err := vec.GetMetricWithLabelValues(values...)
		if err != nil {
			return nop{}
		}
		return timer{o}
	}
}

// register adds a collector; a name already taken by a metric of another
// kind or other labels is refused, and said once.
func (e *Exporter) register(name string, c prometheus.Collector) bool {
	if err := e.reg.Register(c); err != nil {
		if !e.refused[name] && e.log != nil {
			e.log.Warnf("prometheus: metric %s is not exported: %v", name, err)
		}
		e.refused[name] = true
		return false
	}
	return true
}

func (e *Exporter) name(n string) string { return clean(e.prefix + n) }

// clean turns a Benthos name into one Prometheus accepts.
func clean(n string) string {
	var b strings.Builder
	for i, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r == ':':
			b.WriteRune(r)
		case r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func cleanLabels(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.ReplaceAll(clean(k), ":", "_")
	}
	return out
}

type counter struct{ c prometheus.Counter }

func (c counter) Incr(n int64) { c.c.Add(float64(n)) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Set(n int64) { g.g.Set(float64(n)) }

type timer struct{ o prometheus.Observer }

func (t timer) Timing(ns int64) { t.o.Observe(float64(ns) / 1e9) }

// nop stands in for a metric that could not be registered.
type nop struct{}

func (nop) Incr(int64)   {}
func (nop) Set(int64)    {}
func (nop) Timing(int64) {}
