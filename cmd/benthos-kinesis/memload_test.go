package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
)

// buildMemLoad builds testdata/memload (the fake and producer of
// TestSlowOutputMemoryBounded) without the race detector, once per test
// binary.
var buildMemLoad = sync.OnceValues(func() (string, error) { return goBuild("./testdata/memload", "memload") })

// memLoad is a running testdata/memload: a fake Kinesis with stream orders
// of shards shards, serving TLS, and its producer.
type memLoad struct {
	t        *testing.T
	shards   int
	endpoint string
	region   string
	caFile   string
	manifest string
	log      string

	in  io.WriteCloser
	out *bufio.Scanner
}

func startMemLoad(t *testing.T, dir string) *memLoad {
	t.Helper()
	return startMemLoadWith(t, dir, memShards, memRecordSize)
}

// startMemLoadWith starts memload with a stream of shards shards, records
// of recordSize bytes, and more flags (e.g. -max-record-kib).
func startMemLoadWith(t *testing.T, dir string, shards, recordSize int, flags ...string) *memLoad {
	t.Helper()
	bin, err := buildMemLoad()
	if err != nil {
		t.Fatal(err)
	}
	l := &memLoad{t: t, shards: shards, caFile: filepath.Join(dir, "ca.pem"), manifest: filepath.Join(dir, "produced.txt"),
		log: filepath.Join(dir, "memload.log")}
	logFile, err := os.Create(l.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-shards", strconv.Itoa(shards), "-record-size", strconv.Itoa(recordSize),
		"-ca-file", l.caFile, "-manifest", l.manifest}, flags...)...)
	cmd.Stderr = logFile
	if l.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	l.out = bufio.NewScanner(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// It exits when its stdin ends; kill it if it does not.
	t.Cleanup(func() {
		l.in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	ready := l.reply("ready")
	if _, err := fmt.Sscanf(ready, "%s %s", &l.endpoint, &l.region); err != nil {
		t.Fatalf("memload: %q: %v", ready, err)
	}
	return l
}

// reply reads memload's next line, which must start with word, and returns
// the rest of it.
func (l *memLoad) reply(word string) string {
	l.t.Helper()
	if !l.out.Scan() {
		l.t.Fatalf("memload ended (%v) before answering %q; its log:\n%s", l.out.Err(), word, memLog(l.log))
	}
	rest, ok := strings.CutPrefix(l.out.Text(), word)
	if !ok {
		l.t.Fatalf("memload answered %q, want %q ...", l.out.Text(), word)
	}
	return strings.TrimSpace(rest)
}

func (l *memLoad) call(command, word string) string {
	l.t.Helper()
	if _, err := io.WriteString(l.in, command+"\n"); err != nil {
		l.t.Fatalf("memload %q: %v; its log:\n%s", command, err, memLog(l.log))
	}
	return l.reply(word)
}

func (l *memLoad) subscriptions() int {
	l.t.Helper()
	n, err := strconv.Atoi(l.call("subscriptions", "subscriptions"))
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

func (l *memLoad) waitSubscribed(logPath string) {
	l.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := l.subscriptions(); n < l.shards; n = l.subscriptions() {
		if time.Now().After(deadline) {
			l.t.Fatalf("%d of %d shards subscribed within 30s; log:\n%s", n, l.shards, memLog(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// big writes one record of size bytes to each of the first shards shards,
// all at once: a plain one, or a KPL aggregate of user records of 1 MiB
// (agg).
func (l *memLoad) big(shards, size int, agg bool) {
	l.t.Helper()
	cmd := "big"
	if agg {
		cmd = "bigagg"
	}
	l.call(fmt.Sprintf("%s %d %d", cmd, shards, size), cmd)
}

// produce writes backlog records at once, then rate records per second until
// stop.
func (l *memLoad) produce(backlog, rate int) {
	l.t.Helper()
	l.call(fmt.Sprintf("produce %d %d", backlog, rate), "producing")
}

// stop ends production and returns what was written: id -> partition key
// and id -> "<len>:<sha256>" of the data, and how long records were written
// at the rate.
func (l *memLoad) stop() (inputtest.Produced, map[string]string, time.Duration) {
	l.t.Helper()
	var n int
	var seconds float64
	if _, err := fmt.Sscanf(l.call("stop", "produced"), "%d %g", &n, &seconds); err != nil {
		l.t.Fatal(err)
	}
	data, err := os.ReadFile(l.manifest)
	if err != nil {
		l.t.Fatal(err)
	}
	want, shas := make(inputtest.Produced, n), make(map[string]string, n)
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			l.t.Fatalf("memload manifest line %q: want <id> <key> <len>:<sha256>", line)
		}
		want[f[0]], shas[f[0]] = f[1], f[2]
	}
	if len(want) != n {
		l.t.Fatalf("memload produced %d records, its manifest lists %d", n, len(want))
	}
	return want, shas, time.Duration(seconds * float64(time.Second))
}
