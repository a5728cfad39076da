package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// TestMain lets the test binary act as the emulator, so that the end-to-end
// test runs the real main without building another binary.
func TestMain(m *testing.M) {
	if os.Getenv("KINESIS_EMULATOR_AS_MAIN") == "1" {
		os.Args = append([]string{"kinesis-emulator"}, strings.Fields(os.Getenv("KINESIS_EMULATOR_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseStreams(t *testing.T) {
	for _, tc := range []struct {
		spec string
		n    int
		ok   bool
	}{
		{"", 0, true},
		{"orders:4", 1, true},
		{"orders:4, clicks:2", 2, true},
		{"orders", 0, false},
		{"orders:0", 0, false},
		{":3", 0, false},
		{"orders:x", 0, false},
		{"big:2:max-record-kib=10240,spread:4:auto", 2, true},
		{"od:2:on-demand:max-record-kib=2048", 1, true},
		{"big:2:max-record-kib=20480", 0, false},
		{"big:2:max-record-kib=", 0, false},
		{"big:2:fast", 0, false},
	} {
		opts, err := parseStreams(tc.spec)
		if (err == nil) != tc.ok || len(opts) != tc.n {
			t.Errorf("%q: %d options, err %v", tc.spec, len(opts), err)
		}
	}
}

// TestStreamOptionsReachTheStream: the options of a stream of -streams are
// the stream's, as DescribeStreamSummary tells them.
func TestStreamOptionsReachTheStream(t *testing.T) {
	t.Parallel()
	opts, err := parseStreams("big:1:max-record-kib=10240,spread:2:auto,plain:1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kinesisfake.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := srv.NewClient()
	for name, want := range map[string]string{
		"big":    "PROVISIONED 10240 USER_PARTITION_KEY",
		"spread": "ON_DEMAND 1024 AUTO",
		"plain":  "PROVISIONED 1024 USER_PARTITION_KEY",
	} {
		out, err := c.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		d := out.StreamDescriptionSummary
		if got := fmt.Sprintf("%s %d %s", d.StreamModeDetails.StreamMode, aws.ToInt32(d.MaxRecordSizeInKiB), d.RecordDistributionStrategy); got != want {
			t.Errorf("stream %s: %s, want %s", name, got, want)
		}
	}
}

func TestEmulatorRunsAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KINESIS_EMULATOR_AS_MAIN=1",
		"KINESIS_EMULATOR_ARGS=-listen 127.0.0.1:0 -streams orders:4,clicks:2 -log-level debug")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no endpoint line: %v; stderr: %s", err, stderr.String())
	}
	endpoint := strings.TrimSpace(line)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint line %q", line)
	}

	c := kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "x", SecretAccessKey: "y"}, nil
		}),
	})
	out, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.StreamNames, ",") != "clicks,orders" {
		t.Fatalf("streams %v", out.StreamNames)
	}
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
	if err != nil || *sum.StreamDescriptionSummary.OpenShardCount != 4 {
		t.Fatalf("orders: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "op=ListStreams") || !strings.Contains(stderr.String(), "stopping") {
		t.Fatalf("log lacks the calls or the stop: %s", stderr.String())
	}
}

// TestHelp: -h describes the tool and every flag, and is not an error.
func TestHelp(t *testing.T) {
	var out strings.Builder
	err := run([]string{"-h"}, io.Discard, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
	for _, want := range []string{"kinesis-emulator runs a local Kinesis", "any credentials", "-produce", "-tls-cert-file", "-streams", "max-record-kib=N", "auto", "-on-demand-advantage"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, out.String())
		}
	}
}

// TestProduceRateAndAggregates: -produce stream:N writes N events a second
// (ten ticks), aggregates counted by their events, and each aggregate holds
// events of several partition keys that all map to the shard it is in, as
// the KPL lays them out.
func TestProduceRateAndAggregates(t *testing.T) {
	srv, err := kinesisfake.New(kinesisfake.Stream("orders", 4))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := parseProduce("orders:20")
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.loop(ctx, srv, slog.New(slog.DiscardHandler), ticks); close(done) }()
	for range 20 { // two seconds
		ticks <- time.Time{}
	}
	cancel()
	<-done

	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	events, aggregates, keysInAggregates := 0, 0, map[string]bool{}
	for _, sh := range shards {
		r, err := kpl.ParseHashKeyRange(*sh.HashKeyRange.StartingHashKey, *sh.HashKeyRange.EndingHashKey)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := srv.ShardRecords("orders", *sh.ShardId)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			users, aggregated, err := kpl.Unpack(nil, rec.Data)
			if err != nil {
				t.Fatal(err)
			}
			if !aggregated {
				events++
				continue
			}
			aggregates++
			events += len(users)
			for _, u := range users {
				keysInAggregates[u.PartitionKey] = true
				if !r.Contains(kpl.PartitionHashKey(u.PartitionKey)) {
					t.Errorf("aggregate in shard %s holds a user record of key %s, which maps to another shard", *sh.ShardId, u.PartitionKey)
				}
			}
		}
	}
	if events != 40 {
		t.Errorf("20 ticks at 20 events/s wrote %d events, want 40", events)
	}
	if aggregates == 0 || len(keysInAggregates) <= aggregates {
		t.Errorf("%d aggregates with %d distinct keys: want aggregates of several keys each", aggregates, len(keysInAggregates))
	}
}
