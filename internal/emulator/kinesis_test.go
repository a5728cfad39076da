package emulator

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestKinesisLocalPutAndGetRecords(t *testing.T) {
	t.Parallel()
	start := time.Now()
	k := KinesisLocal(t)
	t.Logf("kinesis-local ready at %s in %v", k.Endpoint, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := k.Client()

	createStream(ctx, t, c, "polling", 2)
	want := putRecords(ctx, t, c, "polling", 300)
	shards := shardIDs(ctx, t, c, "polling")
	if len(shards) != 2 {
		t.Fatalf("got shards %v, want 2", shards)
	}

	var got []putRecord
	for _, shard := range shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName:        aws.String("polling"),
			ShardId:           aws.String(shard),
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("GetShardIterator %s: %v", shard, err)
		}
		iterator := it.ShardIterator
		for iterator != nil {
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(50)})
			if err != nil {
				t.Fatalf("GetRecords %s: %v", shard, err)
			}
			for _, r := range out.Records {
				got = append(got, putRecord{shard: shard, seq: aws.ToString(r.SequenceNumber), data: string(r.Data)})
			}
			if len(out.Records) == 0 { // everything was written before reading
				break
			}
			iterator = out.NextShardIterator
		}
	}
	assertExactlyOnce(t, want, got)
}

// TestKinesisLocalListensOnLoopbackOnly checks the preload: kinesis-local
// binds 0.0.0.0 by itself, for both its plain and its TLS port.
func TestKinesisLocalListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	k := KinesisLocal(t)
	ports := readReport(k.proc.report)
	if len(ports) != 2 {
		t.Fatalf("preload reported listeners %v, want the plain and the TLS port", ports)
	}
	external := nonLoopbackIPv4(t)
	if external == nil {
		t.Log("no non-loopback address on this machine: only the report is checked")
	}
	for label, port := range ports {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		if err != nil {
			t.Errorf("port %d (asked %d) not reachable on loopback: %v", port, label, err)
			continue
		}
		conn.Close()
		if external == nil {
			continue
		}
		addr := net.JoinHostPort(external.String(), fmt.Sprint(port))
		if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			conn.Close()
			t.Errorf("port %d (asked %d) is reachable on %s", port, label, addr)
		}
	}
}

func nonLoopbackIPv4(t *testing.T) net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP
		}
	}
	return nil
}

func TestKinesisLocalStop(t *testing.T) {
	t.Parallel()
	k := KinesisLocal(t)
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	if processExists(k.PID()) {
		t.Fatalf("pid %d still exists after Stop", k.PID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := k.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }).ListStreams(ctx, &kinesis.ListStreamsInput{}); err == nil {
		t.Fatal("ListStreams succeeded after Stop")
	}
	if err := k.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestKinesisLocalCodeCache starts kinesis-local twice on an empty code cache
// directory: the first start compiles its script and saves V8's code cache
// there, the second compiles from that cache and serves as well.
func TestKinesisLocalCodeCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := KinesisLocal(t, WithEnv(envCodeCache, dir))
	var saved []string
	deadline := time.Now().Add(30 * time.Second)
	for len(saved) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no code cache saved in %s within 30s; output:\n%s", dir, first.proc.out)
		}
		time.Sleep(100 * time.Millisecond)
		saved, _ = filepath.Glob(filepath.Join(dir, "main.js-*.v8cache"))
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	second := KinesisLocal(t, WithEnv(envCodeCache, dir))
	if out := second.proc.out.String(); !strings.Contains(out, "compiled from the code cache "+saved[0]) {
		t.Fatalf("the second start did not compile from %s; output:\n%s", saved[0], out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := second.Client().CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("cached"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatalf("CreateStream on the emulator started from the cache: %v", err)
	}
}
