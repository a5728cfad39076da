package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/benthos-kinesis/benthos-kinesis/input"
)

// runTimeout bounds one run of an input scenario.
const runTimeout = 2 * time.Minute

// readWithInput reads stream through the input in a Benthos pipeline whose
// output counts and acknowledges every batch (after -output-delay, one batch
// at a time). It measures from starting the
// stream (Connect included) to the acknowledgement of the last record; then
// it stops the stream, so that records read twice would show in the count.
//
// The input runs with its defaults (checkpoint.limit 1024, commit_period 1s,
// deaggregate on, no batching policy, auto_replay_nacks on), a fresh
// checkpoint directory, and Benthos metrics off (the stream builder's
// default). fields, then the -set ones, are set in the input's configuration.
func readWithInput(ctx context.Context, f *fake, m *meter, stream string, fields settings) error {
	dir, err := os.MkdirTemp("", "kinesis-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	sb := service.NewStreamBuilder()
	sb.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	conf, err := inputYAML(f, stream, dir, fields)
	if err != nil {
		return err
	}
	if err := sb.AddInputYAML(conf); err != nil {
		return err
	}
	done := make(chan struct{})
	var once sync.Once
	err = sb.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		n := 0
		for _, msg := range batch {
			data, err := msg.AsBytes()
			if err != nil {
				return err
			}
			n += len(data)
		}
		if f.cfg.outputDelay > 0 {
			time.Sleep(f.cfg.outputDelay)
		}
		m.count(len(batch), n)
		if m.records.Load() >= int64(f.cfg.records) {
			once.Do(func() { close(done) })
		}
		return nil
	})
	if err != nil {
		return err
	}
	pipeline, err := sb.Build()
	if err != nil {
		return err
	}

	ran := make(chan error, 1)
	m.begin()
	go func() { ran <- pipeline.Run(ctx) }()
	running := true
	select {
	case <-done:
	case rerr := <-ran:
		running = false
		err = fmt.Errorf("the pipeline stopped after %d records: %v", m.records.Load(), rerr)
	case <-time.After(runTimeout):
		err = fmt.Errorf("only %d of %d records within %v", m.records.Load(), f.cfg.records, runTimeout)
	}
	m.end()
	if running {
		if serr := pipeline.StopWithin(30 * time.Second); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the pipeline: %w", serr))
		}
		<-ran
	}
	return err
}

// inputYAML is the input's configuration for the fake: the defaults, except
// what reaching the fake needs, the checkpoint directory and trim_horizon,
// then the scenario's fields and the -set ones.
func inputYAML(f *fake, stream, dir string, fields settings) (string, error) {
	conf := map[string]any{
		"streams":     []string{stream},
		"endpoint":    f.srv.Endpoint(),
		"region":      f.srv.Region(),
		"credentials": map[string]any{"id": "fake", "secret": "fake"},
		"tls":         map[string]any{"enabled": true, "root_cas": string(f.srv.CertificatePEM())},
		"start_from":  "trim_horizon",
		"checkpoint":  map[string]any{"dir": dir},
	}
	for _, kv := range slices.Concat(fields, f.cfg.set) {
		if err := kv.apply(conf); err != nil {
			return "", err
		}
	}
	out, err := yaml.Marshal(map[string]any{"aws_kinesis_streams": conf})
	return string(out), err
}

// settings are the -set flags: fields of the input's configuration.
type settings []setting

type setting struct {
	path  string
	value any
}

func (s *settings) String() string { return fmt.Sprint(*s) }

// Set parses path=value; value is an integer, a boolean or a string.
func (s *settings) Set(kv string) error {
	path, raw, ok := strings.Cut(kv, "=")
	if !ok || path == "" {
		return fmt.Errorf("want path=value, e.g. checkpoint.limit=20000")
	}
	var value any = raw
	if n, err := strconv.Atoi(raw); err == nil {
		value = n
	} else if b, err := strconv.ParseBool(raw); err == nil {
		value = b
	}
	*s = append(*s, setting{path: path, value: value})
	return nil
}

// apply sets the field at the setting's dot path in conf.
func (kv setting) apply(conf map[string]any) error {
	keys := strings.Split(kv.path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := conf[k].(map[string]any)
		if !ok {
			if _, taken := conf[k]; taken {
				return fmt.Errorf("field %s: %s is not an object", kv.path, k)
			}
			next = map[string]any{}
			conf[k] = next
		}
		conf = next
	}
	conf[keys[len(keys)-1]] = kv.value
	return nil
}
