package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// fakeSTS answers AssumeRole with the temporary credentials of key, and
// counts the calls by who signed them and by the role asked for.
func fakeSTS(t *testing.T, key string) (endpoint string, calls, roles *emulator.Signatures) {
	calls, roles = &emulator.Signatures{}, &emulator.Signatures{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRole" {
			http.Error(w, "only AssumeRole", http.StatusBadRequest)
			return
		}
		calls.Add(r.Header)
		roles.Count(r.Form.Get("RoleArn"))
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>assumed-secret</SecretAccessKey>
      <SessionToken>assumed-token</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <Arn>%s/benthos-kinesis</Arn>
      <AssumedRoleId>AROATEST:benthos-kinesis</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>sts-1</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, key, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), r.Form.Get("RoleArn"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls, roles
}

// TestLeaseTableInAnotherRegionAndAccount: with checkpoint.dynamodb's own
// region and credentials (static keys that assume a role), the config
// lints clean, every call to the table is signed by the role's credentials
// for the table's region, the role is assumed with the table's keys, and
// every call to Kinesis is signed by the input's keys for the stream's
// region; the records flow.
func TestLeaseTableInAnotherRegionAndAccount(t *testing.T) {
	t.Parallel()
	kinesisCalls := &emulator.Signatures{}
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2),
		kinesisfake.OnRequest(func(_ string, h http.Header) { kinesisCalls.Add(h) }))
	ddb := emulator.NewDynamoDBProxy(t, emulator.Dynalite(t))
	stsURL, stsCalls, stsRoles := fakeSTS(t, "ASIATABLEROLE")
	const role = "arn:aws:iam::222222222222:role/leases"
	for i := range 40 {
		if _, _, err := srv.Put("orders", fmt.Sprint("k", i%4), []byte(fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out.jsonl")
	config := filepath.Join(dir, "account.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
http: { enabled: false }
input:
  aws_kinesis_streams:
    streams: [ orders ]
    endpoint: %s
    region: %s
    credentials: { id: AKIDSTREAM, secret: stream-secret }
    tls: { enabled: true, root_cas_file: %s }
    reader: polling
    start_from: trim_horizon
    checkpoint:
      commit_period: 100ms
      dynamodb:
        table: leases
        create: true
        endpoint: %s
        region: eu-west-1
        credentials: { id: AKIDTABLE, secret: table-secret, role: '%s' }
output:
  file: { path: %s, codec: lines }
logger: { level: info }
`, srv.Endpoint(), srv.Region(), ca, ddb.Endpoint, role, out)), 0o644); err != nil {
		t.Fatal(err)
	}
	if lint, err := exec.Command(bin, "lint", config).CombinedOutput(); err != nil {
		t.Fatalf("lint: %v\n%s", err, lint)
	}

	cmd := exec.Command(bin, "run", config)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_STS="+stsURL)
	logPath := filepath.Join(dir, "run.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(out)
		if strings.Count(string(data), "\n") >= 40 {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("not every record within 30 s; log:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	table := ddb.Signers()
	if len(table) != 1 || table["ASIATABLEROLE eu-west-1 dynamodb"] == 0 {
		t.Errorf("lease table calls signed %v; want all by the assumed role's ASIATABLEROLE for eu-west-1", table)
	}
	assumed, roles := stsCalls.Counts(), stsRoles.Counts()
	if roles[role] == 0 || len(roles) != 1 || assumed["AKIDTABLE eu-west-1 sts"] == 0 || len(assumed) != 1 {
		t.Errorf("STS calls %v of roles %v; want AssumeRole of %s signed by the table's AKIDTABLE for eu-west-1", assumed, roles, role)
	}
	stream := kinesisCalls.Counts()
	if want := "AKIDSTREAM " + srv.Region() + " kinesis"; len(stream) != 1 || stream[want] == 0 {
		t.Errorf("Kinesis calls signed %v; want all by the input's %q", stream, want)
	}

	// The checkpoint commands reach the table the same way, by their
	// --dynamodb-* flags: the role assumed with the command's own keys.
	before := ddb.Signers()["ASIATABLEROLE eu-west-1 dynamodb"]
	show := exec.Command(bin, "checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca,
		"--table", "leases", "--dynamodb-endpoint", ddb.Endpoint, "--dynamodb-region", "eu-west-1", "--dynamodb-role", role, "--json")
	show.Env = append(os.Environ(), "AWS_ENDPOINT_URL_STS="+stsURL, "AWS_ACCESS_KEY_ID=AKIDCLI", "AWS_SECRET_ACCESS_KEY=cli-secret",
		"AWS_REGION="+srv.Region(), "AWS_EC2_METADATA_DISABLED=true")
	if out, err := show.CombinedOutput(); err != nil || strings.Count(string(out), `"shard":`) != 2 {
		t.Fatalf("checkpoint show with the table's region and role: %v\n%s", err, out)
	}
	if n := ddb.Signers()["ASIATABLEROLE eu-west-1 dynamodb"]; n <= before {
		t.Errorf("checkpoint show made no call to the table as the role in eu-west-1: %v", ddb.Signers())
	}
	if stsCalls.Counts()["AKIDCLI eu-west-1 sts"] == 0 {
		t.Errorf("checkpoint show did not assume the role with its own keys in eu-west-1: %v", stsCalls.Counts())
	}
	lone := exec.Command(bin, "checkpoint", "show", "--stream", "orders", "--endpoint", srv.Endpoint(), "--ca-file", ca,
		"--table", "leases", "--dynamodb-endpoint", ddb.Endpoint, "--dynamodb-role-external-id", "x")
	lone.Env = show.Env
	if out, err := lone.CombinedOutput(); err == nil || !strings.Contains(string(out), "--dynamodb-role-external-id needs --dynamodb-role") {
		t.Errorf("an external id without a role: %v\n%s", err, out)
	}
}
