// Command kinesis-emulator runs the in-process fake Kinesis Data Streams
// server (internal/kinesisfake) on its own, for local development and demos.
//
// It prints the endpoint URL as the first line on stdout once it is ready,
// logs to stderr, and stops cleanly on SIGINT or SIGTERM:
//
//	kinesis-emulator -listen 127.0.0.1:4568 -streams orders:4,clicks:2
//
// With -produce it also writes demo order events into a stream, some of them
// as KPL aggregated records.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h and -help asked for the usage, which was written: no error.
	case err != nil:
		fmt.Fprintln(os.Stderr, "kinesis-emulator:", err)
		os.Exit(2)
	}
}

// usage is what -h prints before the flags.
const usage = `kinesis-emulator runs a local Kinesis Data Streams for development and
demos: the fake Kinesis the tests use, serving the control plane, GetRecords
and SubscribeToShard (Enhanced Fan-Out) as AWS does, with AWS's quotas.

It prints its endpoint URL as the first line on stdout once ready, logs to
stderr, keeps its data in memory only, and stops on SIGINT or SIGTERM. It
accepts any credentials (give the input static ones, e.g. id: local,
secret: local). Plain HTTP on 127.0.0.1:4568 by default; -tls serves HTTPS
with HTTP/2, as AWS serves fan-out (-tls-cert-file writes the certificate
for the client to trust).

  kinesis-emulator -streams orders:4
  kinesis-emulator -tls -tls-cert-file ca.pem -streams orders:4 -produce orders:20
  kinesis-emulator -streams big:2:max-record-kib=10240,spread:4:auto

A stream of -streams takes options after its shard count, each after a
colon: max-record-kib=N (its MaxRecordSizeInKiB, 1024 to 10240: records up
to 10 MiB, as AWS allows since 2025), on-demand (ON_DEMAND mode), auto (an
ON_DEMAND stream that places records itself, ignoring partition keys, as
AWS's RecordDistributionStrategy AUTO since 2026). UpdateMaxRecordSize and
UpdateStreamRecordDistributionStrategy change them while it runs.

Flags:
`

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kinesis-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var (
		listen     = fs.String("listen", "127.0.0.1:4568", "address to listen on")
		streams    = fs.String("streams", "", "streams to create, e.g. orders:4,clicks:2 (name:shards[:option...], options max-record-kib=N, on-demand, auto)")
		useTLS     = fs.Bool("tls", false, "serve HTTPS with a self-signed certificate and HTTP/2 (as AWS)")
		certFile   = fs.String("tls-cert-file", "", "with -tls, write the certificate (PEM) here for clients to trust")
		lifetime   = fs.Duration("subscription-lifetime", 5*time.Minute, "how long a SubscribeToShard stream lasts")
		activation = fs.Duration("consumer-activation-delay", 3*time.Second, "how long a new consumer stays CREATING")
		quotas     = fs.Bool("quotas", true, "enforce the AWS read and control-plane quotas")
		writeQ     = fs.Bool("write-quotas", false, "enforce the per-shard write quotas")
		advantage  = fs.Bool("on-demand-advantage", false, "the account has On-demand Advantage: 50 fan-out consumers a stream, not 20")
		region     = fs.String("region", "us-east-1", "region in ARNs")
		account    = fs.String("account", "000000000000", "account id in ARNs")
		logLevel   = fs.String("log-level", "info", "debug (every call), info, warn or error")
		produce    = fs.String("produce", "", "write demo order events to a stream, e.g. orders:20 (stream:events per second, exactly); once a second a write is a KPL aggregate of up to 5 events of several keys bound for one shard, as the KPL writes them")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", *logLevel)
	}
	presets, err := parseStreams(*streams)
	if err != nil {
		return fmt.Errorf("-streams %q: %w", *streams, err)
	}
	prod, err := parseProduce(*produce)
	if err != nil {
		return fmt.Errorf("-produce: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := []kinesisfake.Opt{
		kinesisfake.ListenAddr(*listen),
		kinesisfake.SubscriptionLifetime(*lifetime),
		kinesisfake.ConsumerActivationDelay(*activation),
		kinesisfake.Quotas(*quotas),
		kinesisfake.WriteQuotas(*writeQ),
		kinesisfake.Region(*region),
		kinesisfake.Account(*account),
		kinesisfake.Logger(logger),
	}
	if *useTLS {
		opts = append(opts, kinesisfake.TLS())
	}
	if *advantage {
		opts = append(opts, kinesisfake.OnDemandAdvantage())
	}
	opts = append(opts, presets...)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := kinesisfake.New(opts...)
	if err != nil {
		return err
	}
	defer srv.Close()
	if *certFile != "" {
		if !*useTLS {
			return errors.New("-tls-cert-file needs -tls")
		}
		if err := os.WriteFile(*certFile, srv.CertificatePEM(), 0o644); err != nil {
			return fmt.Errorf("write certificate: %w", err)
		}
	}
	fmt.Fprintln(stdout, srv.Endpoint())
	logger.Info("kinesis-emulator ready", "endpoint", srv.Endpoint(), "region", *region, "streams", *streams)
	if prod != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			prod.run(ctx, srv, logger)
		}()
		defer func() { <-done }()
	}
	<-ctx.Done()
	logger.Info("kinesis-emulator stopping")
	srv.Close()
	return nil
}

// parseStreams parses "orders:4,big:2:max-record-kib=10240,spread:4:auto"
// into Stream options.
func parseStreams(spec string) ([]kinesisfake.Opt, error) {
	var out []kinesisfake.Opt
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(strings.TrimSpace(item), ":")
		var n int
		var err error
		if len(parts) >= 2 {
			n, err = strconv.Atoi(parts[1])
		}
		if len(parts) < 2 || parts[0] == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not name:shards with shards >= 1", item)
		}
		var opts []kinesisfake.StreamOpt
		for _, o := range parts[2:] {
			opt, err := parseStreamOption(o)
			if err != nil {
				return nil, fmt.Errorf("stream %s: %w", parts[0], err)
			}
			opts = append(opts, opt)
		}
		out = append(out, kinesisfake.Stream(parts[0], n, opts...))
	}
	return out, nil
}

// parseStreamOption parses one option of a stream of -streams.
func parseStreamOption(o string) (kinesisfake.StreamOpt, error) {
	switch key, val, _ := strings.Cut(o, "="); key {
	case "max-record-kib":
		kib, err := strconv.Atoi(val)
		if err != nil || kib < 1024 || kib > 10240 {
			return nil, fmt.Errorf("max-record-kib=%s: want a number of KiB from 1024 (1 MiB, the default) to 10240 (10 MiB)", val)
		}
		return kinesisfake.MaxRecordKiB(kib), nil
	case "on-demand":
		return kinesisfake.OnDemand(), nil
	case "auto":
		return kinesisfake.AutoDistribution(), nil
	}
	return nil, fmt.Errorf("option %q: want max-record-kib=N, on-demand or auto", o)
}
