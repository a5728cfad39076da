package metricdef

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestEveryMetricIsNamedWhereUsersLook: every metric, by its full name, is
// in the config spec's generated documentation, in the README's list and
// in the dashboard module's catalogue (config/deploy/metrics.go, a module
// of its own that cannot import this one); no two share a name.
func TestEveryMetricIsNamedWhereUsersLook(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range All() {
		if seen[m.Name] {
			t.Errorf("%s is defined twice", m.Name)
		}
		seen[m.Name] = true
		if m.Kind != KindCounter && m.Kind != KindGauge {
			t.Errorf("%s: kind %q", m.Name, m.Kind)
		}
	}
	if len(seen) < 30 {
		t.Fatalf("%d metrics defined, want every one of the input's (30 or more)", len(seen))
	}
	root := filepath.Join("..", "..")
	for _, doc := range []string{
		"input/aws_kinesis_streams.md", // generated from the spec: make docs
		"README.md",
		"config/deploy/metrics.go",
	} {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range All() {
			if !regexp.MustCompile(`\b` + m.Name + `\b`).Match(data) {
				t.Errorf("%s does not name %s", doc, m.Name)
			}
		}
	}
}

// TestRegisteringAsAnotherKindPanics: a counter registered as a gauge is a
// programming error, caught the first time the input starts.
func TestRegisteringAsAnotherKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("RecordsRead, a counter, registered as a gauge")
		}
	}()
	RecordsRead.Gauge(nil)
}
