package inputtest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Pipeline is a whole Benthos stream: our input, the collector as output.
type Pipeline struct {
	stream *service.Stream
	done   chan error
}

// StartPipeline builds a stream from the input's YAML (the fields under
// aws_kinesis_streams) and runs it.
func StartPipeline(t testing.TB, inputYAML string, out *Collector) *Pipeline {
	t.Helper()
	return StartPipelineLogged(t, inputYAML, out, nil)
}

// StartPipelineLogged is StartPipeline with the pipeline's logs, from level
// info up, written to logs (nil: warnings and errors to stdout).
func StartPipelineLogged(t testing.TB, inputYAML string, out *Collector, logs io.Writer) *Pipeline {
	t.Helper()
	return StartPipelineFunc(t, inputYAML, out.Consume, logs)
}

// StartPipelineFunc is StartPipelineLogged with any function as the output.
func StartPipelineFunc(t testing.TB, inputYAML string, consume service.MessageBatchHandlerFunc, logs io.Writer) *Pipeline {
	t.Helper()
	return StartPipelineWith(t, inputYAML, consume, Options{Logs: logs})
}

// Options are what a test observes of a pipeline.
type Options struct {
	// Logs receives the pipeline's logs from level info up; nil: warnings
	// and errors go to stdout.
	Logs io.Writer
	// Metrics receives the pipeline's counters and gauges; nil: none.
	Metrics *Metrics
	// Threads and Processor, when Processor is set, put a processor stage
	// between the input and the output, as a pipeline section does.
	Threads   int
	Processor string
	// Input is the input's type name; default aws_kinesis_streams (a test
	// may register the input under another name with other timings).
	Input string
	// Mux, when set, serves the stream's HTTP endpoints (/ready among
	// them), as the binary's http server does.
	Mux *http.ServeMux
}

// StartPipelineThreads is StartPipeline with a processor stage between the
// input and the output: threads pipeline threads running the processor
// (YAML).
func StartPipelineThreads(t testing.TB, inputYAML string, out *Collector, threads int, processor string) *Pipeline {
	t.Helper()
	return StartPipelineWith(t, inputYAML, out.Consume, Options{Threads: threads, Processor: processor})
}

// StartPipelineWith is StartPipelineFunc with the logs and metrics of opts.
func StartPipelineWith(t testing.TB, inputYAML string, consume service.MessageBatchHandlerFunc, opts Options) *Pipeline {
	t.Helper()
	sb := service.NewStreamBuilder()
	if opts.Metrics != nil {
		env := service.NewEnvironment()
		if err := opts.Metrics.register(env, "inputtest_metrics"); err != nil {
			t.Fatal(err)
		}
		sb = env.NewStreamBuilder()
		if err := sb.SetMetricsYAML("inputtest_metrics: {}"); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Mux != nil {
		sb.SetHTTPMux(opts.Mux)
	}
	if opts.Processor != "" {
		sb.SetThreads(opts.Threads)
		if err := sb.AddProcessorYAML(opts.Processor); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Logs != nil {
		sb.SetLogger(slog.New(slog.NewTextHandler(opts.Logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	} else {
		sb.SetLoggerYAML("level: warn")
	}
	input := opts.Input
	if input == "" {
		input = "aws_kinesis_streams"
	}
	if err := sb.AddInputYAML(input + ":\n" + Indent(strings.TrimSpace(inputYAML), "  ")); err != nil {
		t.Fatal(err)
	}
	if err := sb.AddBatchConsumerFunc(consume); err != nil {
		t.Fatal(err)
	}
	s, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{stream: s, done: make(chan error, 1)}
	go func() { p.done <- s.Run(context.Background()) }()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Ended reports whether the pipeline has ended by itself, and with what.
func (p *Pipeline) Ended() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err // keep it for Stop
		return true, err
	default:
		return false, nil
	}
}

// Stop stops the pipeline cleanly: the input stops reading, pending acks
// are waited for, and the input's Close commits.
func (p *Pipeline) Stop(t testing.TB) {
	t.Helper()
	if p.stream == nil {
		return
	}
	if err := p.stream.StopWithin(30 * time.Second); err != nil {
		t.Errorf("stopping the pipeline: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not end within 30 s of being stopped")
	}
	p.stream = nil
}

// StopWhen waits until out holds at least n messages, then a moment more
// (so that a duplicate or a stray record would show), and stops the pipeline.
func (p *Pipeline) StopWhen(t testing.TB, out *Collector, n int, within time.Duration) {
	t.Helper()
	out.WaitFor(t, n, within)
	time.Sleep(300 * time.Millisecond)
	p.Stop(t)
}
