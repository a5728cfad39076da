package deploy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write the generated dashboard to "+DashboardFile+" (go generate does)")

// TestDashboardIsGenerated: the committed dashboard is what dashboard.go
// generates. With -update it writes it instead.
func TestDashboardIsGenerated(t *testing.T) {
	got, err := DashboardJSON()
	if err != nil {
		t.Fatalf("generating the dashboard: %v", err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(DashboardFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(DashboardFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(DashboardFile)
	if err != nil {
		t.Fatalf("%v: generate it with `go generate` in config/deploy", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < min(len(gl), len(wl)) && gl[line] == wl[line] {
			line++
		}
		g, w := "(end of file)", "(end of file)"
		if line < len(gl) {
			g = gl[line]
		}
		if line < len(wl) {
			w = wl[line]
		}
		t.Fatalf("%s is out of date with dashboard.go: at line %d it has\n\t%s\nwhere the code generates\n\t%s\nrun `go generate` in config/deploy and commit the file",
			DashboardFile, line+1, strings.TrimSpace(w), strings.TrimSpace(g))
	}
}

// TestDashboardQueries: a grouping by a label the series do not carry is
// an error naming the panel, and scrape labels are always there.
func TestDashboardQueries(t *testing.T) {
	bad := []row{{"Lag", []panel{graph("Lag by shard", "ms", "", q(maxBy(streamMillisBehind.now(), "shard"), "{{shard}}"))}}}
	_, err := buildDashboard(bad)
	if err == nil || !strings.Contains(err.Error(), `panel "Lag by shard"`) || !strings.Contains(err.Error(), `"shard"`) {
		t.Errorf("grouping kinesis_stream_millis_behind_latest by shard: err = %v, want an error naming the panel and the label", err)
	}
	for _, e := range []expr{
		sumBy(rate(recordsRead), perInstance...),
		maxBy(sumBy(rate(recordsRead), "stream", "shard"), "stream"),
	} {
		if e.err != nil {
			t.Errorf("%s: %v", e.text, e.err)
		}
	}
	if e := maxBy(sumBy(rate(recordsRead), "stream"), "shard"); e.err == nil {
		t.Errorf("%s: no error, want one: the sum by stream has no shard label", e.text)
	}
	if got, want := sumBy(rate(bytesRead), "stream").text, `sum by (stream) (rate(kinesis_bytes_read{stream=~"$stream"}[$__rate_interval]))`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := bytesInFlight.now().text, "kinesis_bytes_in_flight"; got != want {
		t.Errorf("a metric without a stream label is not filtered by stream: got %s, want %s", got, want)
	}
}

// TestDashboardLayout: every row fills the grid's width, stats or not.
func TestDashboardLayout(t *testing.T) {
	g, s := graph("g", "", "", q(bytesInFlight.now(), "")), stat("s", "", q(bytesInFlight.now(), ""))
	layouts := [][]panel{{g}, {g, g}, {g, g, g, g, g}, {g, g, s, s}, {s, g, g, g, g}}
	for _, r := range rows {
		layouts = append(layouts, r.panels)
	}
	for _, ps := range layouts {
		ws := widths(ps)
		total := uint32(0)
		for _, w := range ws {
			total += w
		}
		if total != gridWidth {
			t.Errorf("%d panels (%d stats) laid out as %v: %d wide, want %d", len(ps), countStats(ps), ws, total, gridWidth)
		}
	}
}

func countStats(ps []panel) int {
	n := 0
	for _, p := range ps {
		if p.stat {
			n++
		}
	}
	return n
}
