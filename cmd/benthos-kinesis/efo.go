package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/urfave/cli/v2"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
)

// efoCommand is the `efo` subcommand of the binary: it registers, describes,
// lists and deregisters stream consumers, for the eager registration strategy
// (register once, outside the pipelines) and for operators.
func efoCommand() *cli.Command {
	common := streamFlags()
	named := append([]cli.Flag{&cli.StringFlag{Name: "consumer-name", Usage: "the stream consumer's name (required)", Required: true}}, common...)
	timeout := &cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "how long to wait for the consumer to become ACTIVE"}
	return &cli.Command{
		Name:  "efo",
		Usage: "Manage Enhanced Fan-Out stream consumers",
		Description: "Static credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n" +
			"AWS_SESSION_TOKEN) or the shared config, as for any AWS SDK program.",
		Subcommands: []*cli.Command{
			{
				Name:   "register",
				Usage:  "Register a consumer if it is absent, wait until it is ACTIVE and print its ARN",
				Flags:  append(named, timeout),
				Action: streamAction(registerAction),
			},
			{
				Name:   "describe",
				Usage:  "Print a consumer as JSON",
				Flags:  named,
				Action: streamAction(describeAction),
			},
			{
				Name:   "list",
				Usage:  "List the consumers of a stream: name, status, ARN",
				Flags:  common,
				Action: streamAction(listAction),
			},
			{
				Name:   "deregister",
				Usage:  "Deregister a consumer (every reader using it loses its subscriptions)",
				Flags:  named,
				Action: streamAction(deregisterAction),
			},
		},
	}
}

// streamFlags are the flags that find a stream and reach AWS.
func streamFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "stream", Usage: "the stream, by name or ARN (required)", Required: true},
		&cli.StringFlag{Name: "region", Usage: "the AWS region (default: the stream ARN's, else the AWS SDK's)"},
		&cli.StringFlag{Name: "endpoint", Usage: "a custom Kinesis endpoint URL, e.g. http://127.0.0.1:4568"},
		&cli.StringFlag{Name: "ca-file", Usage: "a PEM file of certificate authorities to trust for the endpoint (default: the system's)"},
		&cli.StringFlag{Name: "profile", Usage: "a profile of the shared AWS config"},
		&cli.StringFlag{Name: "role", Usage: "the ARN of a role to assume"},
		&cli.StringFlag{Name: "role-external-id", Usage: "the external id to present when assuming the role"},
	}
}

// streamTarget is what the efo and checkpoint subcommands work on: a
// stream found by its name or ARN, with the AWS configuration that reached it.
type streamTarget struct {
	set       awsclient.Settings // what cfg was loaded from
	cfg       aws.Config
	client    *kinesis.Client
	streamARN string
	created   time.Time // the stream's creation time
	name      string
	out       io.Writer
}

func streamAction(fn func(ctx context.Context, c *cli.Context, t streamTarget) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		ctx := c.Context
		ref, arnRegion, err := awsclient.ParseStreamRef(c.String("stream"))
		if err != nil {
			return cli.Exit("--stream "+err.Error(), 2)
		}
		set := awsclient.Settings{
			Region:   c.String("region"),
			Endpoint: c.String("endpoint"),
			Profile:  c.String("profile"), Role: c.String("role"), RoleExternalID: c.String("role-external-id"),
		}
		if err := checkFlags(c); err != nil {
			return cli.Exit(err.Error(), 2)
		}
		if set.Region == "" {
			set.Region = arnRegion
		}
		if arnRegion != "" && set.Region != arnRegion {
			return cli.Exit(fmt.Sprintf("--stream %s: the ARN is in region %s but --region is %s; give one region (or leave --region out)", c.String("stream"), arnRegion, set.Region), 2)
		}
		if path := c.String("ca-file"); path != "" {
			pem, err := os.ReadFile(path)
			if err != nil {
				return cli.Exit(fmt.Sprintf("--ca-file: %v", err), 2)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cli.Exit(fmt.Sprintf("--ca-file %s: no PEM certificate in it", path), 2)
			}
			set.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		cfg, err := awsclient.Load(ctx, set)
		if errors.Is(err, awsclient.ErrNoRegion) {
			return cli.Exit(fmt.Sprintf("--region: %v, and --stream is no ARN that names one", err), 2)
		}
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		client := awsclient.Kinesis(cfg, set.Endpoint)
		where := "region " + cfg.Region
		if set.Endpoint != "" {
			where += " at endpoint " + awsclient.RedactURL(set.Endpoint)
		}
		desc, err := awsclient.DescribeStream(ctx, client, ref, where, "--stream")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		t := streamTarget{set: set, cfg: cfg, client: client, streamARN: desc.ARN, created: desc.Created, name: c.String("consumer-name"), out: c.App.Writer}
		if err := fn(ctx, c, t); err != nil {
			return cli.Exit(err.Error(), 1)
		}
		return nil
	}
}

// checkFlags refuses, before any call, the flag values the service would
// refuse less clearly or never answer: a consumer name Kinesis does not take,
// an endpoint that is no http or https URL (of Kinesis, and of DynamoDB for
// the checkpoint commands), a region not of AWS's form. A flag a command
// does not have reads as empty and is not checked.
func checkFlags(c *cli.Context) error {
	if c.IsSet("timeout") && c.Duration("timeout") <= 0 {
		return fmt.Errorf("--timeout %v: expected a positive duration, how long to wait for the consumer (default 5m)", c.Duration("timeout"))
	}
	if d := c.Duration("kcl-failover-time"); c.IsSet("kcl-failover-time") && (d <= 0 || d > maxKCLFailover) {
		return fmt.Errorf("--kcl-failover-time %v: expected the application's failoverTimeMillis, more than 0 and at most %v (KCL's default is 10s): the import waits that long to see whether a KCL worker still renews its leases", d, maxKCLFailover)
	}
	if c.IsSet("consumer-name") {
		if err := efo.CheckConsumerName(c.String("consumer-name")); err != nil {
			return fmt.Errorf("--consumer-name %w", err)
		}
	}
	for _, flag := range []string{"endpoint", "dynamodb-endpoint", "from-dynamodb-endpoint"} {
		if v := c.String(flag); v != "" {
			if err := awsclient.CheckEndpoint(v); err != nil {
				return fmt.Errorf("--%s %w", flag, err)
			}
		}
	}
	for _, flag := range []string{"region", "dynamodb-region"} {
		if v := c.String(flag); v != "" {
			if err := awsclient.CheckRegion(v); err != nil {
				return fmt.Errorf("--%s %w", flag, err)
			}
		}
	}
	if v := c.String("group"); v != "" {
		if err := lease.CheckGroup(v); err != nil {
			return fmt.Errorf("--group %q: %w", v, err)
		}
	}
	return nil
}

func registerAction(ctx context.Context, c *cli.Context, t streamTarget) error {
	stderr := stderrOf(c)
	wait := efo.WaitOptions{Timeout: c.Duration("timeout"), Logger: warnings{stderr}}
	consumer, err := efo.Register(ctx, t.client, t.streamARN, t.name, wait)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(t.out, consumer.ARN)
	return err
}

// warnings writes the warnings and errors of a wait (e.g. an endpoint that
// does not answer, retried until --timeout) to w, the command's stderr;
// stdout stays the command's answer alone.
type warnings struct{ w io.Writer }

func (warnings) Debugf(string, ...any) {}
func (warnings) Infof(string, ...any)  {}
func (l warnings) Warnf(format string, args ...any) {
	fmt.Fprintf(l.w, "warning: "+format+"\n", args...)
}
func (l warnings) Errorf(format string, args ...any) {
	fmt.Fprintf(l.w, "error: "+format+"\n", args...)
}

func describeAction(ctx context.Context, _ *cli.Context, t streamTarget) error {
	d, err := efo.Lookup(ctx, t.client, t.streamARN, t.name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(t.out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"consumer_name": aws.ToString(d.ConsumerName),
		"consumer_arn":  aws.ToString(d.ConsumerARN),
		"status":        string(d.ConsumerStatus),
		"created":       aws.ToTime(d.ConsumerCreationTimestamp).UTC().Format(time.RFC3339),
		"stream_arn":    aws.ToString(d.StreamARN),
	})
}

func listAction(ctx context.Context, _ *cli.Context, t streamTarget) error {
	p := kinesis.NewListStreamConsumersPaginator(t.client, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(t.streamARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, c := range page.Consumers {
			if _, err := fmt.Fprintf(t.out, "%s\t%s\t%s\n", aws.ToString(c.ConsumerName), c.ConsumerStatus, aws.ToString(c.ConsumerARN)); err != nil {
				return err
			}
		}
	}
	return nil
}

func deregisterAction(ctx context.Context, _ *cli.Context, t streamTarget) error {
	d, err := efo.Lookup(ctx, t.client, t.streamARN, t.name)
	if err != nil {
		return err
	}
	arn := aws.ToString(d.ConsumerARN)
	if err := efo.Deregister(ctx, t.client, arn); err != nil {
		return err
	}
	_, err = fmt.Fprintf(t.out, "deregistered %s\n", arn)
	return err
}
