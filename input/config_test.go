package input

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"

	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// refusedConfigs are configs run refuses, each with what its error says.
// Lint refuses each of them too (TestLintRefusesWhatRunRefuses).
var refusedConfigs = func() []refusedConfig {
	const base = "streams: [a]\nefo: {consumer_name: app}\n"
	const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/a/consumer/app:1700000000"
	const polling = "streams: [single]\nreader: polling\n"
	return []refusedConfig{
		{"unknown reader", base + "reader: kafka", []string{"field reader", `"kafka"`, "expected efo or polling"}},
		{"at_timestamp without timestamp", base + "start_from: at_timestamp", []string{"field start_timestamp", "at_timestamp needs an RFC 3339"}},
		{"malformed timestamp", base + "start_from: at_timestamp\nstart_timestamp: 2024-13-01", []string{"field start_timestamp", `"2024-13-01"`, "neither an RFC 3339 time nor a duration back from now"}},
		{"timestamp without at_timestamp", base + "start_timestamp: 2024-01-01T00:00:00Z", []string{"field start_timestamp", "start_from is latest"}},
		{"unknown start", base + "start_from: earliest", []string{"field start_from", `"earliest"`, "latest, trim_horizon or at_timestamp"}},
		{"no streams", "streams: []", []string{"field streams", "at least one"}},
		{"bad stream name", "streams: ['my stream']", []string{"field streams", `"my stream"`}},
		{"bad ARN", "streams: ['arn:aws:kinesis:us-east-1:12:stream/x']", []string{"field streams", "not a Kinesis stream ARN"}},
		{"two regions", "streams: ['arn:aws:kinesis:us-east-1:123456789012:stream/a', 'arn:aws:kinesis:eu-west-1:123456789012:stream/b']", []string{"field streams", "eu-west-1", "us-east-1"}},
		{"duplicate stream", "streams: [a, a]", []string{"field streams", "listed twice"}},
		{"polling too fast", base + "polling: {interval: 50ms}", []string{"field polling.interval", `"50ms"`, "at least 200ms"}},
		{"polling limit", base + "polling: {limit: 20000}", []string{"field polling.limit", `"20000"`}},
		{"checkpoint limit", base + "checkpoint: {limit: 0}", []string{"field checkpoint.limit", `"0"`}},
		// Before, any positive limit was taken, and with this one the
		// warning about records read past the checkpoint overflowed.
		{"checkpoint limit beyond the tracker", base + "checkpoint: {limit: 9223372036854775807}", []string{"field checkpoint.limit", `"9223372036854775807"`, "expected 1 to 2147483647"}},
		{"bad endpoint", base + "endpoint: localhost:4568", []string{"field endpoint", `"localhost:4568"`, "expected an http or https URL"}},
		{"endpoint of another scheme", base + "endpoint: ftp://x", []string{"field endpoint", `"ftp://x"`, "expected an http or https URL"}},
		// Before, the region was not checked: calls failed or were retried
		// for ever.
		{"bad region", base + "region: us east 1", []string{"field region", `"us east 1"`, "expected an AWS region such as us-east-1"}},
		{"secret without id", base + "credentials: {secret: x}", []string{"field credentials", "id and secret go together"}},
		{"bad role", base + "credentials: {role: reader}", []string{"field credentials.role", `"reader"`, "role ARN"}},
		{"efo without consumer name", "streams: [a]", []string{"field efo.consumer_name", "needs a consumer name"}},
		{"bad consumer name", "streams: [a]\nefo: {consumer_name: 'my app'}", []string{"field efo.consumer_name", `"my app"`, "expected a consumer name of 1 to 128"}},
		{"eager without consumer name", "streams: [a]\nefo: {registration: eager}", []string{"field efo.consumer_name", "registration eager"}},
		{"unknown registration", "streams: [a]\nefo: {consumer_name: app, registration: always}", []string{"field efo.registration", `"always"`, "lazy, eager or none"}},
		{"none without ARNs", "streams: [a]\nefo: {registration: none}", []string{"field efo.consumer_arns", "every stream"}},
		{"none missing a stream", "streams: [a, b]\nefo: {registration: none, consumer_arns: {a: '" + arn + "'}}", []string{"field efo.consumer_arns", "no consumer ARN for stream b"}},
		{"none malformed ARN", "streams: [a]\nefo: {registration: none, consumer_arns: {a: 'arn:aws:kinesis:us-east-1:123456789012:stream/a'}}", []string{"field efo.consumer_arns.a", "not a stream consumer ARN"}},
		{"none ARN of another stream", "streams: [b]\nefo: {registration: none, consumer_arns: {b: '" + arn + "'}}", []string{"field efo.consumer_arns.b", arn, "consumer of stream arn:aws:kinesis:us-east-1:123456789012:stream/a, not of b"}},
		{"none with a name", "streams: [a]\nefo: {registration: none, consumer_name: app, consumer_arns: {a: '" + arn + "'}}", []string{"field efo.consumer_name", "not used with registration none"}},
		{"none ARN for an unknown stream", "streams: [a]\nefo: {registration: none, consumer_arns: {a: '" + arn + "', c: '" + arn + "'}}", []string{"field efo.consumer_arns", `"c"`, "not a stream"}},
		{"none ARN of another region", "streams: [a]\nregion: eu-west-1\nefo: {registration: none, consumer_arns: {a: '" + arn + "'}}", []string{"field efo.consumer_arns.a", "region us-east-1", "reads region eu-west-1"}},
		{"lease table and dir", base + "checkpoint: {dir: /tmp/cp, dynamodb: {table: leases}}", []string{"field checkpoint.dir", `"/tmp/cp"`, "with a lease table the checkpoints live in the table"}},
		{"lease table without a name", base + "checkpoint: {dynamodb: {table: ''}}", []string{"field checkpoint.dynamodb.table", `""`, "expected a DynamoDB table name"}},
		{"lease table name", base + "checkpoint: {dynamodb: {table: 'my leases'}}", []string{"field checkpoint.dynamodb.table", `"my leases"`}},
		{"lease period too short", base + "checkpoint: {dynamodb: {table: leases, lease_period: 500ms}}", []string{"field checkpoint.dynamodb.lease_period", `"500ms"`, "at least 1s"}},
		{"lease table endpoint", base + "checkpoint: {dynamodb: {table: leases, endpoint: 'localhost:8000'}}", []string{"field checkpoint.dynamodb.endpoint", `"localhost:8000"`, "expected an http or https URL"}},
		// Before, ftp://x was taken and every call to it retried for ever.
		{"lease table endpoint of another scheme", base + "checkpoint: {dynamodb: {table: leases, endpoint: 'ftp://x'}}", []string{"field checkpoint.dynamodb.endpoint", `"ftp://x"`, "expected an http or https URL"}},
		{"lease table name with a space", base + "checkpoint: {dynamodb: {table: 'bad name!'}}", []string{"field checkpoint.dynamodb.table", `"bad name!"`, "3 to 255"}},
		{"negative steal limit", base + "checkpoint: {dynamodb: {table: leases, steal_limit: -1}}", []string{"field checkpoint.dynamodb.steal_limit", `"-1"`}},
		{"unknown balance", base + "checkpoint: {dynamodb: {table: leases, balance: random}}", []string{"field checkpoint.dynamodb.balance", `"random"`, "throughput or count"}},
		{"lease group name", base + "checkpoint: {dynamodb: {table: leases, group: 'my group'}}", []string{"field checkpoint.dynamodb.group", `"my group"`, "1 to 128"}},
		{"lease table region", base + "checkpoint: {dynamodb: {table: leases, region: 'EU West'}}", []string{"field checkpoint.dynamodb.region", `"EU West"`, "expected an AWS region"}},
		{"lease table role", base + "checkpoint: {dynamodb: {table: leases, credentials: {role: leases}}}", []string{"field checkpoint.dynamodb.credentials.role", `"leases"`, "expected a role ARN"}},
		{"lease table key without secret", base + "checkpoint: {dynamodb: {table: leases, credentials: {id: AKID}}}", []string{"field checkpoint.dynamodb.credentials", "id and secret go together"}},
		{"aws_kinesis fields", base + "checkpoint_limit: 10\nstart_from_oldest: true", []string{"field checkpoint_limit: is a field of aws_kinesis or a KCL setting; here: checkpoint.limit", "field start_from_oldest", "start_from: trim_horizon"}},
		{"KCL names", base + "application_name: app", []string{"field application_name", "efo.consumer_name"}},
		{"deregister with eager", "streams: [a]\nefo: {consumer_name: app, registration: eager, deregister_on_close: true}", []string{"field efo.deregister_on_close", "only with registration lazy"}},
		// Before, lint passed these and run refused them (bad input, round
		// two: F6, F3, F5, F8, F9).
		{"stream by name and ARN", "streams: [single, 'arn:aws:kinesis:us-east-1:000000000000:stream/single']\nreader: polling", []string{"field streams", "listed twice"}},
		{"ARN of another region", "streams: ['arn:aws:kinesis:eu-west-1:000000000000:stream/single']\nregion: us-east-1\nreader: polling", []string{"field streams", "region eu-west-1 but region is us-east-1"}},
		{"id without secret", polling + "credentials: {id: x}", []string{"field credentials", "id and secret go together"}},
		{"role not an ARN", polling + "credentials: {role: garbage}", []string{"field credentials.role", `"garbage"`}},
		{"lease table role not an ARN", polling + "checkpoint: {dynamodb: {table: leases, credentials: {role: garbage}}}", []string{"field checkpoint.dynamodb.credentials.role", `"garbage"`}},
		{"consumer name of 200 characters", "streams: [a]\nefo: {consumer_name: " + strings.Repeat("c", 200) + "}", []string{"field efo.consumer_name", "expected a consumer name of 1 to 128"}},
		{"consumer ARN garbage", "streams: [a]\nefo: {registration: none, consumer_arns: {a: garbage}}", []string{"field efo.consumer_arns.a", "not a stream consumer ARN"}},
		{"consumer ARNs with lazy", "streams: [a]\nefo: {consumer_name: app, consumer_arns: {a: '" + arn + "'}}", []string{"field efo.consumer_arns"}},
		{"polling interval not a duration", polling + "polling: {interval: soon}", []string{"polling.interval", `"soon"`}},
		{"polling interval without unit", polling + "polling: {interval: '300'}", []string{"polling.interval", `"300"`}},
		{"commit period not a duration", polling + "checkpoint: {commit_period: often}", []string{"checkpoint.commit_period", `"often"`}},
		{"lease period without unit", polling + "checkpoint: {dynamodb: {table: leases, lease_period: '1'}}", []string{"checkpoint.dynamodb.lease_period", `"1"`}},
		{"balance in capitals", polling + "checkpoint: {dynamodb: {table: leases, balance: COUNT}}", []string{"field checkpoint.dynamodb.balance", `"COUNT"`, "throughput or count"}},
		{"memory limit beyond int64", polling + "memory_limit: '99999999999999999999999'", []string{"field memory_limit", `"99999999999999999999999"`}},
		{"start time after 2262", polling + "start_from: at_timestamp\nstart_timestamp: '2999-01-01T00:00:00Z'", []string{"field start_timestamp", `"2999-01-01T00:00:00Z"`, "expected a time between 2013-01-01T00:00:00Z", "and a few minutes from now"}},
		{"start time a year ahead", polling + "start_from: at_timestamp\nstart_timestamp: '" + time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339) + "'", []string{"field start_timestamp", "a few minutes from now"}},
		{"start time of 1900", polling + "start_from: at_timestamp\nstart_timestamp: '1900-01-01T00:00:00Z'", []string{"field start_timestamp", "expected a time between 2013-01-01T00:00:00Z"}},
		{"start time 200,000 hours back", polling + "start_from: at_timestamp\nstart_timestamp: '-200000h'", []string{"field start_timestamp", `"-200000h"`, "means 2004-", "expected a time between 2013-01-01T00:00:00Z"}},
		{"batching period not a duration", polling + "batching: {period: soon}", []string{"field batching.period", `"soon"`, "expected a duration"}},
		{"batching check not Bloblang", polling + "batching: {period: 1s, check: 'this =='}", []string{"field batching.check", "not a Bloblang query"}},
		{"instance id of 3000 bytes", polling + "checkpoint: {dynamodb: {table: leases, instance_id: " + strings.Repeat("i", 3000) + "}}", []string{"field checkpoint.dynamodb.instance_id", "is 3000 bytes long; expected at most 1024"}},
	}
}()

type refusedConfig struct {
	name, yaml string
	want       []string
}

func TestConfigErrorsNameFieldAndValue(t *testing.T) {
	t.Parallel()
	for _, c := range refusedConfigs {
		t.Run(c.name, func(t *testing.T) {
			_, err := newTestInput(t, c.yaml)
			if err == nil {
				t.Fatalf("no error for %q", c.yaml)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	in, err := newTestInput(t, "streams: [orders, 'arn:aws:kinesis:eu-west-1:123456789012:stream/clicks']\nefo: {consumer_name: app}")
	if err != nil {
		t.Fatal(err)
	}
	c := in.conf
	if c.Region != "eu-west-1" {
		t.Errorf("region %q, want the ARN's eu-west-1", c.Region)
	}
	if c.Reader != readerEFO || c.EFO.Registration != registrationLazy || c.EFO.ConsumerName != "app" {
		t.Errorf("efo defaults: %+v", c)
	}
	if f, ok := c.Coordination.(fileConfig); !ok || f.Dir != defaultCheckpointDir || c.CheckpointLimit != 1024 || c.StartFrom != startLatest || !c.Deaggregate || c.PollingIdle != polling.DefaultIdleInterval {
		t.Errorf("defaults: %+v", c)
	}
	if len(c.Streams) != 2 || c.Streams[1].Name != "clicks" || c.Streams[1].ARN == "" {
		t.Errorf("streams: %+v", c.Streams)
	}
	// An interval longer than idle_interval's default never backs off; it
	// is not refused (before idle_interval existed, it was fine).
	slow, err := newTestInput(t, "streams: [a]\nreader: polling\npolling: {interval: 3s}")
	if err != nil || slow.conf.PollingIdle != 3*time.Second {
		t.Errorf("polling.interval 3s: idle interval %v, %v; want 3s", slow.conf.PollingIdle, err)
	}
	if _, ok := c.Coordination.(*leaseConfig); ok {
		t.Errorf("a lease table without checkpoint.dynamodb: %+v", c.Coordination)
	}

	in, err = newTestInput(t, "streams: [orders]\nefo: {consumer_name: app}\ncheckpoint: {dynamodb: {table: leases}}")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := in.conf.Coordination.(*leaseConfig)
	if !ok || l.Table != "leases" || l.Create || l.LeasePeriod != 10*time.Second || l.StealLimit != 4 || l.Balance != balanceThroughput || l.InstanceID == "" {
		t.Errorf("lease table defaults: %+v", l)
	}
	again, err := newTestInput(t, "streams: [orders]\nefo: {consumer_name: app}\ncheckpoint: {dynamodb: {table: leases}}")
	if err != nil {
		t.Fatal(err)
	}
	if again.conf.Coordination.(*leaseConfig).InstanceID == l.InstanceID {
		t.Errorf("two inputs got the same instance id %q", l.InstanceID)
	}
}

func TestLintRules(t *testing.T) {
	env := service.NewEnvironment()
	cases := map[string]string{
		"streams: [a]": "field efo.consumer_name",
		"streams: [a]\nefo: {registration: none}":                                                 "field efo.consumer_arns",
		"streams: [a]\nreader: polling\nstart_from: at_timestamp":                                 "start_from at_timestamp needs",
		"streams: [a]\nreader: polling\nstart_timestamp: 2024-01-01T00:00:00Z":                    "start_from is latest",
		"streams: [a]\nreader: polling\ncheckpoint: {dir: /tmp/cp, dynamodb: {table: leases}}":    "field checkpoint.dir: is set together with checkpoint.dynamodb",
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: ''}}":                      "field checkpoint.dynamodb.table: a lease table needs a table name",
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: t1, lease_period: 200ms}}": "field checkpoint.dynamodb.lease_period: 200ms is too short; expected at least 1s",
		"streams: [a]\nreader: polling\nenhanced_fan_out: {enabled: true}":                        "field enhanced_fan_out: is a field of aws_kinesis or a KCL setting; here: reader: efo",
		"streams: [a]\nreader: polling\ncommit_period: 5s":                                        "field commit_period: is a field of aws_kinesis or a KCL setting; here: checkpoint.commit_period",
		"streams: [a, 'foo:0']\nreader: polling":                                                  "field streams: foo:0 is neither a stream name",
		"streams: [a]\nreader: kafka":                                                             "field reader: kafka is not one of efo, polling",
		"streams: [a]\nreader: polling\nstart_from: oldest":                                       "field start_from: oldest is not one of latest, trim_horizon, at_timestamp",
		"streams: [a]\nreader: polling\ncheckpoint: {commit_period: -1s}":                         "field checkpoint.commit_period: -1s is too short",
		"streams: [a]\nreader: polling\nstart_from: at_timestamp\nstart_timestamp: 2024-13-01":    "field start_timestamp: 2024-13-01 is neither an RFC 3339 time",
		"streams: [a]\nreader: polling\npolling: {interval: 50ms}":                                "field polling.interval: 50ms is too short; expected at least 200ms",
		"streams: [a]\nreader: polling\nmemory_limit: 64XB":                                       `field memory_limit: "64XB": expected a size in bytes`,
		"streams: [a]\nreader: polling\nmemory_limit: -5MiB":                                      `field memory_limit: "-5MiB": expected a size in bytes`,
		// Before, these four passed the lint.
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: 'bad name!'}}":             "field checkpoint.dynamodb.table: bad name!: expected a DynamoDB table name",
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: t1, endpoint: 'ftp://x'}}": `field checkpoint.dynamodb.endpoint: "ftp://x": expected an http or https URL`,
		"streams: [a]\nreader: polling\nendpoint: 'localhost:4568'":                               `field endpoint: "localhost:4568": expected an http or https URL`,
		"streams: [a]\nreader: polling\nregion: us east 1":                                        `field region: "us east 1": expected an AWS region`,
		"streams: [a]\nreader: polling\ncheckpoint: {limit: 9223372036854775807}":                 "field checkpoint.limit: 9223372036854775807: expected 1 to 2147483647",
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: t1, group: 'a/b'}}":        "field checkpoint.dynamodb.group: a/b: expected a group name",
		"streams: [a]\nreader: polling\ncheckpoint: {dynamodb: {table: t1, region: 'EU'}}":        `field checkpoint.dynamodb.region: "EU": expected an AWS region`,
	}
	// A password in an endpoint is not shown by the lint either.
	cases["streams: [a]\nreader: polling\nendpoint: 'ftp://user:hunter2@host'"] = `field endpoint: "ftp://user:xxxxx@host": expected an http or https URL`
	for yaml, want := range cases {
		sb := env.NewStreamBuilder()
		err := sb.SetYAML("input:\n  aws_kinesis_streams:\n" + indent(yaml) + "\noutput:\n  stdout: {}\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lint of %q: got %v, want %q", yaml, err, want)
		}
	}
}

// TestLintRefusesWhatRunRefuses: lint runs run's own parse of the input's
// config (configErrors): every config run refuses, lint refuses, each
// line naming a field (the first lint line may be another mistake of the
// config than run's first: a whole-config rule reports first). Before, 27 configs passed lint and were refused by run at
// once. (Values of the wrong YAML type, such as strict_order: sure, are
// refused by the CLI's lint (CLIOpt, TestLintRefusesValuesOfTheWrongType):
// Benthos's linter skips a component's lint rules when it cannot convert a
// value.)
func TestLintRefusesWhatRunRefuses(t *testing.T) {
	t.Parallel()
	env := service.NewEnvironment()
	for _, c := range refusedConfigs {
		t.Run(c.name, func(t *testing.T) {
			_, runErr := newTestInput(t, c.yaml)
			if runErr == nil {
				t.Fatalf("run took %q", c.yaml)
			}
			err := env.NewStreamBuilder().SetYAML("input:\n  aws_kinesis_streams:\n" + indent(c.yaml) + "\noutput:\n  drop: {}\n")
			if err == nil {
				t.Fatalf("lint passed %q, which run refuses: %v", c.yaml, runErr)
			}
			if !strings.Contains(err.Error(), c.want[0]) && !strings.Contains(runErr.Error(), "failed to parse") {
				t.Logf("lint says %q, run %q", err, runErr)
			}
			namesField(t, err)
		})
	}
}

// namesField fails unless a lint error names a field in its first line
// and every line of its own (Benthos's lints of its own fields, such as
// batching.check's Bloblang, give a line and column only).
func namesField(t *testing.T, err error) {
	t.Helper()
	// A lint starts with its position, "(line,column)"; a value with a
	// line break in it continues the lint on the next line.
	lines := lintStart.Split(strings.TrimPrefix(err.Error(), "lint errors: "), -1)
	if !fieldNamed.MatchString(lines[0]) {
		t.Errorf("lint line %q names no field", lines[0])
	}
	for _, line := range lines[1:] {
		if !fieldNamed.MatchString(line) && !strings.Contains(err.Error(), "field batching.") {
			t.Errorf("lint line %q names no field", line)
		}
	}
}

var lintStart = regexp.MustCompile(`\n(?:\(\d+,\d+\) )`)

var fieldNamed = regexp.MustCompile(`field [a-z_]+(\.[a-z_0-9]+)*|'[a-z_]+(\.[a-z_]+)*'`)

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func TestStartTimestampBackFromNow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	got, err := parseStartTimestamp("-24h", now)
	if err != nil || !got.Equal(now.Add(-24*time.Hour)) {
		t.Fatalf("-24h: %v, %v", got, err)
	}
	if _, err := parseStartTimestamp("-1 day", now); err == nil || !strings.Contains(err.Error(), "field start_timestamp") {
		t.Fatalf("-1 day: %v, want an error naming the field", err)
	}
	in, err := newTestInput(t, "streams: [a]\nreader: polling\nstart_from: at_timestamp\nstart_timestamp: -90m")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(in.conf.StartTimestamp); d < 89*time.Minute || d > 91*time.Minute {
		t.Fatalf("start_timestamp -90m is %v ago", d)
	}
}

// TestCheckpointLimitBound: checkpoint.limit is taken up to what the ack
// tracker counts and no further (before, 9223372036854775807 was taken and
// overflowed the warning about records read past the checkpoint).
func TestCheckpointLimitBound(t *testing.T) {
	t.Parallel()
	const base = "streams: [a]\nreader: polling\ncheckpoint: {limit: %d}"
	in, err := newTestInput(t, fmt.Sprintf(base, maxCheckpointLimit))
	if err != nil || in.conf.CheckpointLimit != maxCheckpointLimit {
		t.Fatalf("limit %d: %v", maxCheckpointLimit, err)
	}
	if first := read.BehindWarnFactor * in.conf.CheckpointLimit; first <= 0 || first > math.MaxInt/(1<<20) {
		t.Fatalf("the first warning at %d records past the checkpoint is near an overflow", first)
	}
	if _, err := newTestInput(t, fmt.Sprintf(base, maxCheckpointLimit+1)); err == nil || !strings.Contains(err.Error(), "field checkpoint.limit") {
		t.Fatalf("limit %d: %v, want an error naming the field", maxCheckpointLimit+1, err)
	}
}

// TestLeaseTableSettings: the lease table is reached with the input's
// region and credentials unless checkpoint.dynamodb gives its own: its
// profile or keys replace the input's profile and keys, its role the
// input's role; from_input: false starts from the SDK's chain instead.
// Fields left empty (a copied full config) change nothing.
func TestLeaseTableSettings(t *testing.T) {
	t.Parallel()
	const roleA, roleB = "arn:aws:iam::111111111111:role/reader", "arn:aws:iam::222222222222:role/leases"
	const head = "streams: [orders]\nreader: polling\nregion: us-east-1\ncredentials: {id: AKIDSTREAM, secret: s, role: '" + roleA + "'}\n"
	input := awsclient.Settings{Region: "us-east-1", ID: "AKIDSTREAM", Secret: "s", Role: roleA}
	for _, tc := range []struct {
		name, dynamo string
		want         awsclient.Settings
	}{
		{"the input's", "{table: leases}", input},
		{"empty fields", "{table: leases, credentials: {profile: '', id: '', secret: '', token: '', role: '', role_external_id: ''}}", input},
		{"own region", "{table: leases, region: eu-west-1}", awsclient.Settings{Region: "eu-west-1", ID: "AKIDSTREAM", Secret: "s", Role: roleA}},
		{"own role with the input's keys", "{table: leases, credentials: {role: '" + roleB + "', role_external_id: x}}", awsclient.Settings{Region: "us-east-1", ID: "AKIDSTREAM", Secret: "s", Role: roleB, RoleExternalID: "x"}},
		{"own profile, the input's role", "{table: leases, region: eu-central-1, credentials: {profile: mine}}", awsclient.Settings{Region: "eu-central-1", Profile: "mine", Role: roleA}},
		{"the SDK chain", "{table: leases, credentials: {from_input: false}}", awsclient.Settings{Region: "us-east-1"}},
		{"a role from the SDK chain", "{table: leases, credentials: {from_input: false, role: '" + roleB + "'}}", awsclient.Settings{Region: "us-east-1", Role: roleB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := newTestInput(t, head+"checkpoint: {dynamodb: "+tc.dynamo+"}")
			if err != nil {
				t.Fatal(err)
			}
			got := in.conf.Coordination.(*leaseConfig).settings(in.conf)
			if got != tc.want {
				t.Errorf("table settings %+v, want %+v", got, tc.want)
			}
		})
	}
}
