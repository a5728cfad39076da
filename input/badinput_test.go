package input

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

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
	k := emulator.KinesisLocal(t)
	inputtest.CreateStream(t, k.Client(), "orders", 1)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"missing stream", localInput(k, "nope", t.TempDir(), ""),
			[]string{"stream nope does not exist", "region us-east-1", "at endpoint " + k.Endpoint, "field streams"}},
		{"unusable checkpoint dir", localInput(k, "orders", filepath.Join(file, "sub"), ""),
			[]string{"field checkpoint.dir", filepath.Join(file, "sub"), "cannot be created"}},
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
	k := emulator.KinesisLocal(t)
	logs := &inputtest.Logs{}
	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := sb.AddInputYAML("aws_kinesis_streams:\n" + inputtest.Indent(strings.TrimSpace(localInput(k, "later", t.TempDir(), "")), "  ")); err != nil {
		t.Fatal(err)
	}
	out := &inputtest.Collector{}
	if err := sb.AddBatchConsumerFunc(out.Consume); err != nil {
		t.Fatal(err)
	}
	s, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	time.Sleep(4 * time.Second)

	text := logs.String()
	attempts := strings.Count(text, "stream later does not exist")
	if attempts == 0 {
		t.Fatalf("no error naming the missing stream in the logs:\n%s", text)
	}
	if attempts > 8 {
		t.Errorf("%d attempts in 4 s: no backoff between them", attempts)
	}
	if strings.Contains(text, "goroutine ") || strings.Contains(text, "panic") {
		t.Fatalf("stack trace in the logs:\n%s", text)
	}
	select {
	case err := <-done:
		t.Fatalf("the pipeline ended: %v", err)
	default:
	}

	client := k.Client()
	inputtest.CreateStream(t, client, "later", 1)
	want := inputtest.Produce(t, client, "later", "l", 20, 3)
	out.WaitFor(t, len(want), time.Minute)
	if err := s.StopWithin(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	<-done
	inputtest.CheckDelivery(t, out.All(), want, true)
}
