package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// Typed PromQL for the dashboard: queries are built from the binary's
// metrics declared with their kind and labels (metrics.go), so that a rate
// of a gauge does not compile, and a grouping by a label its series do not
// carry is an error when the dashboard is generated instead of a panel that
// shows one unlabelled line in Grafana.

// scrapeLabels are the labels Prometheus adds to every series it scrapes:
// instance (the target's host:port) always, pod under the usual Kubernetes
// relabelling of pod targets.
var scrapeLabels = []string{"instance", "pod"}

// perInstance groups by the scrape labels: one series per process.
var perInstance = scrapeLabels

// streamVar is the dashboard variable that filters the series of metrics
// labelled by stream.
const streamVar = "stream"

// metric is a series name the binary exports and the labels it sets.
type metric struct {
	name   string
	labels []string
}

// counter is a metric that only grows: it is read through rate or increase.
type counter struct{ metric }

// gauge is a metric read as it stands.
type gauge struct{ metric }

// catalogue holds every metric declared, by name: what the autoscaling
// manifests may name.
var catalogue = map[string]metric{}

func newCounter(name string, labels ...string) counter { return counter{declare(name, labels)} }

func newGauge(name string, labels ...string) gauge { return gauge{declare(name, labels)} }

func declare(name string, labels []string) metric {
	m := metric{name, labels}
	catalogue[name] = m
	return m
}

// expr is a PromQL expression, the labels its result carries besides the
// scrape labels, and the metrics it names. An error made while building it
// is kept in err and reported when the dashboard is built.
type expr struct {
	text    string
	labels  []string
	metrics []string
	err     error
}

// selector is the metric's series, those of the streams the dashboard's
// stream variable selects when the metric is labelled by stream.
func (m metric) selector() string {
	if slices.Contains(m.labels, "stream") {
		return fmt.Sprintf(`%s{stream=~"$%s"}`, m.name, streamVar)
	}
	return m.name
}

// now is the gauge's current value.
func (g gauge) now() expr {
	return expr{text: g.selector(), labels: g.labels, metrics: []string{g.name}}
}

// rate is the counter's per-second rate over Grafana's rate interval.
func rate(c counter) expr { return c.over("rate") }

// increase is how much the counter grew over Grafana's rate interval.
func increase(c counter) expr { return c.over("increase") }

func (c counter) over(fn string) expr {
	return expr{text: fmt.Sprintf("%s(%s[$__rate_interval])", fn, c.selector()), labels: c.labels, metrics: []string{c.name}}
}

// sumBy adds the series of e up per value of the labels by (none: one sum).
func sumBy(e expr, by ...string) expr { return aggregate("sum", e, by) }

// maxBy is the largest series of e per value of the labels by.
func maxBy(e expr, by ...string) expr { return aggregate("max", e, by) }

func aggregate(op string, e expr, by []string) expr {
	if e.err != nil {
		return e
	}
	for _, l := range by {
		if !slices.Contains(e.labels, l) && !slices.Contains(scrapeLabels, l) {
			e.err = fmt.Errorf("%s by %q of %s: its series carry the labels %v and the scrape labels %v, not %q", op, l, e.text, e.labels, scrapeLabels, l)
			return e
		}
	}
	text := fmt.Sprintf("%s(%s)", op, e.text)
	if len(by) > 0 {
		text = fmt.Sprintf("%s by (%s) (%s)", op, strings.Join(by, ", "), e.text)
	}
	return expr{text: text, labels: slices.DeleteFunc(slices.Clone(by), func(l string) bool { return slices.Contains(scrapeLabels, l) }), metrics: e.metrics}
}

// ofInstancesWith keeps the series of e scraped from the instances that
// export g: process metrics (which every Go program exports) of this
// binary's processes only.
func ofInstancesWith(e expr, g gauge) expr {
	if e.err != nil {
		return e
	}
	return expr{text: fmt.Sprintf("%s and on (instance) %s", e.text, g.name), labels: e.labels, metrics: append(slices.Clone(e.metrics), g.name)}
}
