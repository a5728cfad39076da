package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestEFOCommands drives `benthos-kinesis efo register|describe|list|
// deregister` against the fake over TLS (trusting it with --ca-file).
func TestEFOCommands(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	srv, ca := startFake(t, t.TempDir(), kinesisfake.Stream("orders", 1),
		kinesisfake.ConsumerActivationDelay(300*time.Millisecond), kinesisfake.ConsumerDeletionDelay(time.Hour))
	efo := command(bin, "efo")
	common := []string{"--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca}
	named := append([]string{"--consumer-name", "app"}, common...)

	out, err := efo(append([]string{"register"}, named...)...)
	if err != nil {
		t.Fatalf("register: %v\n%s", err, out)
	}
	arn := strings.TrimSpace(out)
	if !regexp.MustCompile(`^arn:aws:kinesis:us-east-1:000000000000:stream/orders/consumer/app:\d+$`).MatchString(arn) {
		t.Fatalf("register printed %q, want only the consumer ARN", out)
	}
	if again, err := efo(append([]string{"register"}, named...)...); err != nil || strings.TrimSpace(again) != arn {
		t.Fatalf("registering again printed %q (%v), want the same ARN", again, err)
	}

	out, err = efo(append([]string{"describe"}, named...)...)
	var desc map[string]string
	if err != nil || json.Unmarshal([]byte(out), &desc) != nil || desc["status"] != "ACTIVE" || desc["consumer_arn"] != arn {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	out, err = efo(append([]string{"list"}, common...)...)
	if err != nil || !strings.Contains(out, "app\tACTIVE\t"+arn) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = efo(append([]string{"deregister"}, named...)...)
	if err != nil || strings.TrimSpace(out) != "deregistered "+arn {
		t.Fatalf("deregister: %v\n%s", err, out)
	}
	out, _ = efo(append([]string{"list"}, common...)...)
	if !strings.Contains(out, "app\tDELETING") {
		t.Fatalf("after deregister, list shows:\n%s", out)
	}

	out, err = efo("describe", "--consumer-name", "app", "--stream", "nope", "--endpoint", srv.Endpoint(), "--ca-file", ca)
	if err == nil || !strings.Contains(out, "stream nope does not exist") {
		t.Fatalf("describe of a missing stream: %v\n%s", err, out)
	}
}

// TestCommandsRefuseBadFlags: flag values the service would refuse less
// clearly, or an endpoint it could never reach, are refused before any call
// with an error naming the flag and what was expected (exit 2). Before,
// `efo register --consumer-name ”` got the service's validation error, and
// an ftp:// endpoint or a region with spaces were tried. A password in an
// endpoint is not shown.
func TestCommandsRefuseBadFlags(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	srv, ca := startFake(t, t.TempDir(), kinesisfake.Stream("orders", 1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"efo", "register", "--consumer-name", "", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca}, `--consumer-name "": expected a consumer name of 1 to 128 of a-z A-Z 0-9 _ . -`},
		{[]string{"efo", "describe", "--consumer-name", "my app", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca}, `--consumer-name "my app": expected a consumer name`},
		{[]string{"efo", "list", "--stream", "orders", "--endpoint", "ftp://user:hunter2@x"}, `--endpoint "ftp://user:xxxxx@x": expected an http or https URL`},
		{[]string{"efo", "list", "--stream", "orders", "--region", "us east 1", "--endpoint", srv.Endpoint(), "--ca-file", ca}, `--region "us east 1": expected an AWS region such as us-east-1`},
		{[]string{"checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--table", "leases", "--dynamodb-endpoint", "ftp://x"}, `--dynamodb-endpoint "ftp://x": expected an http or https URL`},
		// Before, these were taken: a timeout of 0 or less was ignored, a
		// negative failover time skipped the check for live KCL workers,
		// and an hour was waited out without a word.
		{[]string{"checkpoint", "show", "--stream", "arn:aws:kinesis:eu-west-1:000000000000:stream/orders", "--region", "us-east-1", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dir", t.TempDir()}, "the ARN is in region eu-west-1 but --region is us-east-1"},
		{[]string{"efo", "register", "--consumer-name", "app", "--timeout", "0s", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca}, `--timeout 0s: expected a positive duration`},
		{[]string{"efo", "register", "--consumer-name", "app", "--timeout", "-1s", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca}, `--timeout -1s: expected a positive duration`},
		{[]string{"checkpoint", "import", "--from", "kcl", "--from-table", "t", "--kcl-failover-time", "-1s", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dir", t.TempDir()}, "--kcl-failover-time -1s: expected the application's failoverTimeMillis, more than 0 and at most 10m0s"},
		{[]string{"checkpoint", "import", "--from", "kcl", "--from-table", "t", "--kcl-failover-time", "1h", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca, "--dir", t.TempDir()}, "--kcl-failover-time 1h0m0s: expected"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = fakeAWSEnv()
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: exit %v, want exit 2 with %q:\n%s", c.args, err, c.want, out)
		}
		if strings.Contains(string(out), "hunter2") {
			t.Errorf("%v: the output shows the endpoint's password:\n%s", c.args, out)
		}
	}
}
