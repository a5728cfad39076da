package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestPrometheusMetrics: with no metrics config, the binary serves every
// Benthos and input metric as Prometheus text on /metrics, with the
// stream and shard as labels.
func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 2))
	for i := range 50 {
		if _, _, err := srv.Put("orders", fmt.Sprint("key-", i%5), []byte(fmt.Sprint("order-", i))); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	config := filepath.Join(dir, "metrics.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
http: { address: %s }
%s    reader: polling
    start_from: trim_horizon
    checkpoint: { dir: %s }
output:
  drop: {}
logger: { level: warn }
`, addr, fakeInputHead(srv, ca), filepath.Join(dir, "cp"))), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, config, filepath.Join(dir, "run.log"))

	read := regexp.MustCompile(`(?m)^kinesis_records_read\{[^}]*shard="shardId-[0-9]+"[^}]*stream="orders"[^}]*\} ([0-9.e+]+)$`)
	deadline := time.Now().Add(30 * time.Second)
	var page string
	for {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page = string(body)
			total := 0.0
			for _, m := range read.FindAllStringSubmatch(page, -1) {
				v, _ := strconv.ParseFloat(m[1], 64)
				total += v
			}
			if resp.StatusCode == http.StatusOK && total >= 50 {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "run.log"))
			t.Fatalf("/metrics did not count 50 records read within 30s; page:\n%s\nlog:\n%s", page, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"# TYPE kinesis_records_read counter", "# TYPE kinesis_millis_behind_latest gauge", "# TYPE kinesis_stream_millis_behind_latest gauge", "# TYPE kinesis_records_unacknowledged gauge", "# TYPE kinesis_bytes_in_flight gauge", "input_received", "process_resident_memory_bytes", "go_goroutines"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(page) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The binary sets the Go soft memory limit from memory_limit (64 MiB by
	// default) plus 24 MiB for the rest of the process, unless GOMEMLIMIT
	// sets it.
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if m := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes ([0-9.e+]+)$`).FindStringSubmatch(page); m == nil {
		t.Error("/metrics lacks go_gc_gomemlimit_bytes")
	} else if v, _ := strconv.ParseFloat(m[1], 64); v != 88<<20 {
		t.Errorf("go_gc_gomemlimit_bytes is %v, want %d (memory_limit 64 MiB + 24 MiB)", v, 88<<20)
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
