package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestGroupWithAnotherPipelineIsReported: three instances of one lease
// group, two running one pipeline and the third another output (an
// archiver's config copied to an indexer). Each reports the instances
// whose config differs from its own, by name, in a warning and in the
// gauge kinesis_group_config_mismatch; their own http addresses and
// instance ids differ without counting.
func TestGroupWithAnotherPipelineIsReported(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 4))
	ddb := emulator.Dynalite(t)
	outputs := map[string]string{
		"archive-0": "drop: {}",
		"archive-1": "drop: {}",
		"index-0":   "file: { path: " + filepath.Join(dir, "index.jsonl") + ", codec: lines }",
	}
	addrs := map[string]string{}
	logs := map[string]string{}
	for id, output := range outputs {
		addrs[id], logs[id] = freeAddr(t), filepath.Join(dir, id+".log")
		config := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(config, []byte(fmt.Sprintf(`
http: { address: %s }
%s    reader: polling
    start_from: trim_horizon
    checkpoint:
      dynamodb: { table: leases, create: true, endpoint: %s, lease_period: 2s, instance_id: %s, group: search }
output:
  %s
logger: { level: info }
`, addrs[id], fakeInputHead(srv, ca), ddb.Endpoint, id, output)), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, bin, config, logs[id])
	}

	want := map[string]int{"archive-0": 1, "archive-1": 1, "index-0": 2}
	gauge := regexp.MustCompile(`(?m)^kinesis_group_config_mismatch\{[^}]*stream="orders"[^}]*\} ([0-9.e+]+)$`)
	got := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for id, n := range want {
		for {
			if resp, err := http.Get("http://" + addrs[id] + "/metrics"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if m := gauge.FindSubmatch(body); m != nil {
					v, _ := strconv.ParseFloat(string(m[1]), 64)
					if got[id] = int(v); got[id] == n {
						break
					}
				}
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logs[id])
				t.Fatalf("instance %s: kinesis_group_config_mismatch %d, want %d within 30 s; log:\n%s", id, got[id], n, log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The warning names the others, the table and group, itself and the
	// part that differs (a first one may name fewer, while the others
	// start).
	for id, others := range map[string]string{"archive-0": "index-0", "archive-1": "index-0", "index-0": "archive-0, archive-1"} {
		waitForLogLine(t, logs[id], time.Now(), "instances "+others+" of lease table leases group search run a pipeline config other than this instance's ("+id+"): their output differs.")
	}
}

// TestGroupOfOneConfigFileWithVariablesIsOnePipeline: two instances run
// one config file whose output path, instance_id and http address are
// ${INST} and ${ADDR}, set to different values for each (as a Deployment
// puts ${HOSTNAME} or ${POD_NAME} in a path): one pipeline, so neither
// reports a mismatch once both share the shards. Before, each warned that
// the other's output differed and the gauge was 1 on both.
func TestGroupOfOneConfigFileWithVariablesIsOnePipeline(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("orders", 4))
	ddb := emulator.Dynalite(t)
	config := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
http: { address: "${ADDR}" }
%s    reader: polling
    start_from: trim_horizon
    checkpoint:
      dynamodb: { table: leases, create: true, endpoint: %s, lease_period: 2s, instance_id: "${INST}", group: search }
output:
  file: { path: "%s/out-${INST}.jsonl", codec: lines }
logger: { level: info }
`, fakeInputHead(srv, ca), ddb.Endpoint, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, logs := map[string]string{}, map[string]string{}
	for _, id := range []string{"a", "b"} {
		addrs[id], logs[id] = freeAddr(t), filepath.Join(dir, id+".log")
		run(t, bin, config, logs[id], "INST="+id, "ADDR="+addrs[id])
	}
	// Two shards each: each saw the other's worker item, digests and all.
	pages := map[string]metricsPage{}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range []string{"a", "b"} {
		for {
			if resp, err := http.Get("http://" + addrs[id] + "/metrics"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if pages[id] = parseMetrics(string(body)); pages[id].total("kinesis_owned_shards") == 2 && pages[id].has("kinesis_group_config_mismatch") {
					break
				}
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logs[id])
				t.Fatalf("instance %s does not hold two shards within 30 s: %s\nlog:\n%s", id, pages[id].kinesis(), log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, id := range []string{"a", "b"} {
		log, _ := os.ReadFile(logs[id])
		if n := pages[id].total("kinesis_group_config_mismatch"); n != 0 || strings.Contains(string(log), "run a pipeline config other than") {
			t.Errorf("instance %s reports a mismatch (gauge %v) with the other instance of its config file:\n%s", id, n, log)
		}
	}
}
