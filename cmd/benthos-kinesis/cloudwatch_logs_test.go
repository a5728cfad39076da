package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestCloudWatchLogsExample runs config/cloudwatch_logs.yaml, as shipped,
// against the fake (its endpoint, TLS and credentials set from outside):
// a subscription record of three log events becomes three lines with their
// log group and stream, a control message becomes nothing, and a record
// that is no envelope is logged with the reason, not written.
func TestCloudWatchLogsExample(t *testing.T) {
	t.Parallel()
	bin, dir, srv, ca := binaryAndFake(t, kinesisfake.Stream("cloudwatch-logs", 1))
	for _, sample := range []string{"data_message.json.gz", "control_message.json.gz", "plain_text.txt"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "testdata", "cloudwatch_logs", sample))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := srv.Put("cloudwatch-logs", sample, data); err != nil {
			t.Fatal(err)
		}
	}
	const in = "input.aws_kinesis_streams."
	cmd := exec.Command(bin, "run",
		"-r", filepath.Join("..", "..", "resources", "cloudwatch_logs.yaml"),
		"-s", "http.enabled=false",
		"-s", in+"tls.enabled=true",
		"-s", in+"tls.root_cas_file="+ca,
		"-s", in+"credentials.id=fake",
		"-s", in+"credentials.secret=fake",
		"-s", in+"checkpoint.dir="+filepath.Join(dir, "cp"),
		filepath.Join("..", "..", "config", "cloudwatch_logs.yaml"))
	cmd.Env = append(os.Environ(), "KINESIS_ENDPOINT="+srv.Endpoint(), "AWS_REGION="+srv.Region())
	logPath := filepath.Join(dir, "run.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	type event struct {
		Message, LogGroup, LogStream, ID, Timestamp string
	}
	var got []event
	deadline := time.After(30 * time.Second)
	for len(got) < 3 {
		select {
		case line, ok := <-lines:
			if !ok {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("the binary stopped after %d lines; log:\n%s", len(got), log)
			}
			var e struct {
				Message   string `json:"message"`
				LogGroup  string `json:"log_group"`
				LogStream string `json:"log_stream"`
				ID        string `json:"id"`
				Timestamp string `json:"timestamp"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			got = append(got, event(e))
		case <-deadline:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%d of 3 lines within 30 s; log:\n%s", len(got), log)
		}
	}
	for i, want := range []string{"START RequestId", `{"level":"info","order_id":7`, "END RequestId"} {
		e := got[i]
		if !strings.HasPrefix(e.Message, want) || e.LogGroup != "/aws/lambda/orders" || !strings.HasPrefix(e.LogStream, "2026/12/03/") || e.ID == "" || !strings.HasPrefix(e.Timestamp, "2025-12-03T00:00:00.") {
			t.Errorf("line %d: %+v, want the message %q... of /aws/lambda/orders", i, e, want)
		}
	}
	// The plain text record is logged with the reason; nothing more is written.
	waitFor := time.Now().Add(10 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		if strings.Contains(string(log), "not a CloudWatch Logs subscription record: it is not gzip") {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("the record that is no envelope was not logged; log:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case line := <-lines:
		t.Fatalf("a fourth line was written: %q", line)
	default:
	}
}
