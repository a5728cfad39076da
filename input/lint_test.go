package input

import (
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
