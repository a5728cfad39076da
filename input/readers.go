package input

import (
	"context"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// readerKind is one way of reading Kinesis (field reader). Everything that
// differs between the ways is here: a third is added by one more value in
// readerKinds.
type readerKind struct {
	// name is the value of field reader; doc describes it in the spec.
	name, doc string
	// shardOwn is what one shard read this way holds besides its records:
	// its goroutines' stacks, its reader's, publisher's and metrics' state
	// (see gomemlimit.go for how it was measured).
	shardOwn int64
	// windowsDiv: the records' half of memory_limit over windowsDiv is for
	// what subscriptions buffer unread in the transport
	// (awsclient.StreamWindows); 0: none.
	windowsDiv int64
	// floor is the least room a read's share of the memory budget is cut to
	// however many shards share it (membudget.SetFloor); 0: none.
	floor int64
	// parse reads the reader's own settings into c; it refuses settings of
	// other readers that would be ignored.
	parse func(pc *service.ParsedConfig, c *config) error
	// open finds a stream as the reader needs it (its ARN, and whatever it
	// reads through) into c, and makes its publisher. c.FirstSeen is when
	// the attempt started: the stream counts as seen then once it is found.
	open func(ctx context.Context, in *kinesisInput, s *stream, ref streamRef, c *read.StreamConfig, where string) error
}

// What one shard being read holds besides its records, as the resident
// memory of the binary idle at many shards over its memory at 4 measured it
// (cmd/kinesis-bench/BENCHMARKS.md, "Again, with the shards' own state
// counted"): fan-out holds more (three goroutines more, the subscription's
// HTTP/2 stream and the SDK's event stream reader).
const (
	shardOwnPolling = 64 << 10
	shardOwnEFO     = 80 << 10
)

var (
	readerEFO = &readerKind{
		name:     "efo",
		doc:      "Enhanced Fan-Out: a registered stream consumer gets a dedicated 2 MiB/s per shard, records are pushed over HTTP/2 (about 70 ms propagation).",
		shardOwn: shardOwnEFO,
		// A quarter of the records' half: fan-out takes an event whole, so
		// it has no floor.
		windowsDiv: 4,
		parse:      parseEFOReader,
		open:       openEFO,
	}
	readerPolling = &readerKind{
		name:     "polling",
		doc:      "GetRecords polling: shared throughput, about 200 ms propagation.",
		shardOwn: shardOwnPolling,
		floor:    leastRead,
		parse: func(pc *service.ParsedConfig, c *config) error {
			// Not used, but a value no reader takes is a mistake all the
			// same, as lint says.
			return checkUnusedEFO(pc.Namespace(fEFO))
		},
		open: openPolling,
	}
	// readerKinds are the readers, the default first.
	readerKinds = []*readerKind{readerEFO, readerPolling}
)

// readerNamed returns the reader of a value of field reader, or nil.
func readerNamed(name string) *readerKind {
	for _, k := range readerKinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// readerNames are the values field reader takes.
func readerNames() []string {
	names := make([]string, len(readerKinds))
	for i, k := range readerKinds {
		names[i] = k.name
	}
	return names
}

// readerDocs describe the readers in the spec.
func readerDocs() map[string]string {
	docs := map[string]string{}
	for _, k := range readerKinds {
		docs[k.name] = k.doc
	}
	return docs
}

// parseEFOReader reads the efo settings, and takes the region from the
// consumer ARNs when none is set.
func parseEFOReader(pc *service.ParsedConfig, c *config) error {
	var err error
	if c.EFO, err = parseEFO(pc.Namespace(fEFO), c.Streams); err != nil {
		return err
	}
	for name, a := range c.EFO.ConsumerARNs {
		region := strings.Split(a.ARN, ":")[3]
		if c.Region == "" {
			c.Region = region
		}
		if region != c.Region {
			return fieldError(fEFO+"."+fEFOConsumerARNs+"."+name, a.ARN, "is in region %s but the input reads region %s; one input reads one region", region, c.Region)
		}
	}
	return nil
}

// describe describes the stream into c: its ARN and creation time, and
// when it was first seen.
func (in *kinesisInput) describe(ctx context.Context, s *stream, ref streamRef, c *read.StreamConfig, where string) error {
	client := s.client
	c.Describe = func(ctx context.Context) (awsclient.Stream, error) {
		return awsclient.DescribeStream(ctx, client, ref, where, "field "+fStreams)
	}
	desc, err := c.Describe(ctx)
	if err != nil {
		return err
	}
	c.ARN, c.Created, c.AutoPlacement = desc.ARN, desc.Created, desc.AutoPlacement
	c.FirstSeen = in.firstSeen(c.Name, c.FirstSeen)
	return nil
}

func openPolling(ctx context.Context, in *kinesisInput, s *stream, ref streamRef, c *read.StreamConfig, where string) error {
	if err := in.describe(ctx, s, ref, c, where); err != nil {
		return err
	}
	name := c.Name
	c.Publisher = polling.New(s.client, c.ARN, polling.Options{
		Interval:     in.conf.PollingInterval,
		IdleInterval: in.conf.PollingIdle,
		Limit:        in.conf.PollingLimit,
		Logger:       in.log,
		Throttled: func(shardID string) {
			in.metrics.throttles.Incr(1, name, shardID)
		},
	})
	return nil
}

// openEFO finds the stream's consumer: with registration none it makes no
// call at all (the consumer ARN names the stream); else it describes the
// stream and registers the consumer (lazy) or waits for it (eager).
// Instances on one lease table register the consumer once: the one that
// claims the registration in the table; the claim is dropped once the
// consumer is there, whoever registered it.
func openEFO(ctx context.Context, in *kinesisInput, s *stream, ref streamRef, c *read.StreamConfig, where string) error {
	conf := in.conf.EFO
	if conf.Registration == registrationNone {
		consumer := conf.ConsumerARNs[c.Name]
		c.ARN = consumer.StreamARN
		c.FirstSeen = in.firstSeen(c.Name, c.FirstSeen)
		c.Publisher = in.efoPublisher(s.client, consumer.ARN, c.Name, nil)
		return nil
	}
	if err := in.describe(ctx, s, ref, c, where); err != nil {
		return err
	}
	arn, name, client := c.ARN, c.Name, s.client
	wait := efo.WaitOptions{Logger: in.log, Claim: in.coord.ClaimRegistration(arn, conf.ConsumerName)}
	var consumer efo.Consumer
	var err error
	if conf.Registration == registrationLazy {
		consumer, err = efo.Register(ctx, client, arn, conf.ConsumerName, wait)
		if err == nil {
			in.dropClaim(ctx, arn, name)
		}
	} else {
		consumer, err = efo.Describe(ctx, client, arn, conf.ConsumerName, wait)
	}
	if err != nil {
		return err
	}
	in.log.Infof("stream %s: reading through consumer %s", name, consumer.ARN)
	if conf.DeregisterOnClose {
		s.deregister = consumer.ARN
	}
	var reregister func(context.Context, string) (string, error)
	if conf.Registration == registrationLazy {
		reregister = func(ctx context.Context, stale string) (string, error) {
			again, err := efo.RegisterAgain(ctx, client, arn, conf.ConsumerName, stale, wait)
			if err == nil {
				in.dropClaim(ctx, arn, name)
			}
			if err == nil && conf.DeregisterOnClose {
				in.connMu.Lock()
				s.deregister = again.ARN
				in.connMu.Unlock()
			}
			return again.ARN, err
		}
	}
	c.Publisher = in.efoPublisher(client, consumer.ARN, name, reregister)
	return nil
}
