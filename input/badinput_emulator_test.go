package input

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// connectErr builds the input from YAML and returns the error of Connect.
func connectErr(t *testing.T, yaml string) error {
	t.Helper()
	in, err := newTestInput(t, yaml)
	if err != nil {
		t.Fatalf("constructor: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = in.Connect(ctx)
	in.Close(context.Background())
	return err
}

func TestConnectErrorsNameWhatIsWrong(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	inputtest.CreateStream(t, k.Client(), "orders", 1)
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"missing stream", localInput(k, "nope", t.TempDir(), ""),
			[]string{"stream nope does not exist", "region us-east-1", "at endpoint " + k.Endpoint, "field streams"}},
		{"refused connection", strings.Replace(localInput(k, "orders", t.TempDir(), ""), k.Endpoint, "http://127.0.0.1:1", 1),
			[]string{"cannot reach Kinesis", "http://127.0.0.1:1", "stream orders", "connection refused"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := connectErr(t, c.yaml)
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
				if testing.Verbose() && w == c.want[0] {
					t.Logf("%v", err)
				}
			}
		})
	}
}

// TestMissingStreamIsRetriedCalmly: a pipeline reading a stream that does not
// exist keeps running, says why at error level with backoff between attempts
// (no crash loop, no stack trace), and starts reading once the stream exists.
func TestMissingStreamIsRetriedCalmly(t *testing.T) {
	t.Parallel()
	k := emulator.KinesisLocal(t)
	logs := &inputtest.Logs{}
	out := &inputtest.Collector{}
	p := inputtest.StartPipelineLogged(t, localInput(k, "later", t.TempDir(), ""), out, logs)

	// Benthos retries a failed Connect with backoff (100 ms growing to 1 s,
	// jittered by half): wait for four attempts, then check that no two of
	// them came less than 40 ms apart. A hot loop would make them microseconds
	// apart.
	var stamps []time.Time
	deadline := time.Now().Add(30 * time.Second)
	for {
		stamps = attemptTimes(t, logs.String(), "stream later does not exist")
		if len(stamps) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d errors naming the missing stream within 30 s, want 4; the logs:\n%s", len(stamps), logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 1; i < len(stamps); i++ {
		if gap := stamps[i].Sub(stamps[i-1]); gap < 40*time.Millisecond {
			t.Errorf("attempts %d and %d came %v apart: no backoff between them", i, i+1, gap)
		}
	}
	text := logs.String()
	if strings.Contains(text, "goroutine ") || strings.Contains(text, "panic") {
		t.Fatalf("stack trace in the logs:\n%s", text)
	}
	if ended, err := p.Ended(); ended {
		t.Fatalf("the pipeline ended: %v", err)
	}

	client := k.Client()
	inputtest.CreateStream(t, client, "later", 1)
	want := inputtest.Produce(t, client, "later", "l", 20, 3)
	out.WaitFor(t, len(want), time.Minute)
	p.Stop(t)
	inputtest.CheckDelivery(t, out.All(), want, true)
}

// attemptTimes returns the times of the log lines (slog text, millisecond
// times) that contain what.
func attemptTimes(t *testing.T, logs, what string) []time.Time {
	t.Helper()
	var stamps []time.Time
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, what) {
			continue
		}
		field, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, field)
		if err != nil {
			t.Fatalf("log line without a time: %q", line)
		}
		stamps = append(stamps, at)
	}
	return stamps
}

// TestUnusableCheckpointDirFailsAtStart: a checkpoint directory that can
// never serve (a file, or a path through a file) fails the input's
// construction, which stops the binary with the message, instead of a
// Connect retried for ever. (It was a Connect error before.)
func TestUnusableCheckpointDirFailsAtStart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, want string }{
		{file, "is a file, not a directory"},
		{filepath.Join(file, "sub"), "cannot be used"},
	} {
		_, err := newTestInput(t, fmt.Sprintf("streams: [orders]\nreader: polling\ncheckpoint: { dir: '%s' }", c.dir))
		if err == nil || !strings.Contains(err.Error(), "field checkpoint.dir") || !strings.Contains(err.Error(), c.dir) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkpoint.dir %s: %v; want an error naming the field, the path and %q", c.dir, err, c.want)
		}
	}
}
