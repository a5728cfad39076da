package input

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"
)

// FuzzLintAgreesWithRun: for generated configs of the input, lint's
// verdict is run's parse verdict (parseConfig, what run checks before it
// reaches AWS or the disk), and a refusal names a field. make test runs
// it for a few seconds; make fuzz-lint for as long as FUZZTIME says.
func FuzzLintAgreesWithRun(f *testing.F) {
	f.Add("single", "", "polling", "latest", "", "1s", 10000, 1024, "1s", "64MiB", "", "throughput", 4, "10s", "", "", "0s")
	f.Add("a,b", "us-east-1", "efo", "at_timestamp", "-24h", "200ms", 1, 1, "10ms", "1KiB", "leases", "count", 0, "2s", "app", "lazy", "1s")
	f.Add("single", "eu-west-1", "polling", "at_timestamp", "2999-01-01T00:00:00Z", "soon", 0, -1, "often", "many", "t", "COUNT", -1, "1", "a b/c", "none", "soon")
	f.Add("arn:aws:kinesis:eu-west-1:000000000000:stream/single", "us-east-1", "polling", "trim_horizon", "1900-01-01T00:00:00Z", "300", 20000, 0, "-1s", "99999999999999999999999", "my leases", "random", 2, "500ms", strings.Repeat("c", 200), "eager", "")
	env := service.NewEnvironment()
	f.Fuzz(func(t *testing.T, streams, region, reader, startFrom, startTS, interval string, limit, cpLimit int, commit, memory, table, balance string, steals int, leasePeriod, consumer, registration, batchPeriod string) {
		conf := map[string]any{
			"streams":                  strings.Split(streams, ","),
			"reader":                   reader,
			"start_from":               startFrom,
			"polling":                  map[string]any{"interval": interval, "limit": limit},
			"checkpoint":               map[string]any{"limit": cpLimit, "commit_period": commit},
			"memory_limit":             memory,
			"batching":                 map[string]any{"period": batchPeriod},
			"efo":                      map[string]any{"consumer_name": consumer, "registration": registration},
			"shard_discovery_interval": "10s",
		}
		if region != "" {
			conf["region"] = region
		}
		if startTS != "" {
			conf["start_timestamp"] = startTS
		}
		if table != "" {
			conf["checkpoint"].(map[string]any)["dynamodb"] = map[string]any{"table": table, "balance": balance, "steal_limit": steals, "lease_period": leasePeriod}
		}
		doc, err := yaml.Marshal(conf)
		if err != nil {
			t.Skip()
		}
		var runErr error
		pc, err := Spec().ParseYAML(string(doc), nil)
		if err != nil {
			runErr = err
		} else {
			_, runErr = parseConfig(pc)
		}
		lintErr := env.NewStreamBuilder().SetYAML("input:\n  aws_kinesis_streams:\n" + indent(strings.TrimSuffix(string(doc), "\n")) + "\noutput:\n  drop: {}\n")
		switch {
		case runErr != nil && lintErr == nil:
			t.Fatalf("lint passed what run refuses (%v):\n%s", runErr, doc)
		case runErr == nil && lintErr != nil:
			t.Fatalf("lint refused what run takes (%v):\n%s", lintErr, doc)
		case lintErr != nil:
			namesField(t, lintErr)
		}
	})
}

// TestLintLeavesFilesToRun: lint runs run's parse without the tls section,
// whose certificate files may exist only where the config runs (the
// README's demo config names one that make demo writes).
func TestLintLeavesFilesToRun(t *testing.T) {
	t.Parallel()
	err := service.NewEnvironment().NewStreamBuilder().SetYAML("input:\n  aws_kinesis_streams:\n" +
		indent("streams: [a]\nreader: polling\ntls: {enabled: true, root_cas_file: /nonexistent/ca.pem}") + "\noutput:\n  drop: {}\n")
	if err != nil {
		t.Fatalf("lint refused a config for a certificate file it cannot see: %v", err)
	}
}

// TestLintRefusesValuesOfTheWrongType: values of the wrong YAML type (the
// three of the bad-input round two that lint passed and run refused) are
// found by the CLI's lint (typeLints, through CLIOpt) at their line, naming
// the field, at any depth of a config file; run refuses each too. A value
// that refers to an environment variable is left to run, and a config of
// the right types has none.
func TestLintRefusesValuesOfTheWrongType(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ conf, want string }{
		{"strict_order: sure", `(3,19) field strict_order: sure is a string; expected a bool (true or false)`},
		{"polling: { limit: many }", `(3,23) field polling.limit: many is a string; expected an integer`},
		{"checkpoint: { limit: '100' }", `(3,26) field checkpoint.limit: "100" is a quoted string; expected an integer`},
		{"polling: { limit: '${LIMIT:100}' }", `field polling.limit: "${LIMIT:100}" is a quoted string; expected an integer`},
		{"efo: { deregister_on_close: 'true' }", `field efo.deregister_on_close: "true" is a quoted string; expected a bool`},
	} {
		t.Run(c.conf, func(t *testing.T) {
			if _, err := newTestInput(t, "streams: [a]\nreader: polling\n"+c.conf); err == nil {
				t.Fatalf("run took %q", c.conf)
			}
			doc := "input:\n  aws_kinesis_streams:\n    " + c.conf + "\n    streams: [a]\noutput:\n  drop: {}\n"
			lints := typeLints([]byte(doc))
			if len(lints) != 1 || !strings.Contains(fmt.Sprintf("(%d,%d) %s", lints[0].line, lints[0].column, lints[0].what), c.want) {
				t.Fatalf("lints %+v, want one with %q", lints, c.want)
			}
			// Under a broker, among resources: found all the same.
			nested := "input:\n  broker:\n    inputs:\n      - aws_kinesis_streams:\n          " + c.conf + "\ninput_resources:\n  - label: k\n    aws_kinesis_streams:\n      " + c.conf + "\n"
			if got := typeLints([]byte(nested)); len(got) != 2 {
				t.Errorf("nested: lints %+v, want two", got)
			}
		})
	}
	for _, ok := range []string{
		"strict_order: true\npolling: { limit: 100 }\ncheckpoint: { limit: 5, dynamodb: { table: t, steal_limit: 2 } }",
		"strict_order: ${STRICT:true}\npolling: { limit: ${LIMIT} }",
		"batching: { count: 10, processors: [ { bloblang: 'root = this' } ] }",
	} {
		doc := "input:\n  aws_kinesis_streams:\n" + indent(ok) + "\noutput:\n  drop: {}\n"
		if got := typeLints([]byte(doc)); len(got) != 0 {
			t.Errorf("lints of a config of the right types (%q): %+v", ok, got)
		}
	}
}
