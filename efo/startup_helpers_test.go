package efo_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awserr"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/shard"
)

// countingAPI is an efo.ConsumerAPI that counts the outcome of every call the
// registration code makes, as the SDK returns it (after the SDK's own
// retries): "ok" or the AWS error code. The fake's Calls counts what reached
// the server, SDK retries included.
type countingAPI struct {
	api efo.ConsumerAPI

	mu       sync.Mutex
	outcomes map[string]int // "<op> <outcome>"
}

func (c *countingAPI) count(op string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = awserr.Code(err)
		if outcome == "" {
			outcome = "error"
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outcomes == nil {
		c.outcomes = map[string]int{}
	}
	c.outcomes[op+" "+outcome]++
}

func (c *countingAPI) get(op, outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outcomes[op+" "+outcome]
}

func (c *countingAPI) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	out, err := c.api.DescribeStreamConsumer(ctx, in, optFns...)
	c.count("DescribeStreamConsumer", err)
	return out, err
}

func (c *countingAPI) RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	out, err := c.api.RegisterStreamConsumer(ctx, in, optFns...)
	c.count("RegisterStreamConsumer", err)
	return out, err
}

func (c *countingAPI) DeregisterStreamConsumer(ctx context.Context, in *kinesis.DeregisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DeregisterStreamConsumerOutput, error) {
	out, err := c.api.DeregisterStreamConsumer(ctx, in, optFns...)
	c.count("DeregisterStreamConsumer", err)
	return out, err
}

// complaints is a logging.Logger that keeps warnings and errors (an efo
// publisher or registration that warns has met trouble) and drops the rest.
type complaints struct {
	mu   sync.Mutex
	msgs []string
}

func (l *complaints) Debugf(string, ...any) {}
func (l *complaints) Infof(string, ...any)  {}
func (l *complaints) Warnf(format string, args ...any) {
	l.add("WARN " + fmt.Sprintf(format, args...))
}
func (l *complaints) Errorf(format string, args ...any) {
	l.add("ERROR " + fmt.Sprintf(format, args...))
}

func (l *complaints) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, msg)
}

func (l *complaints) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

// shardLog records what one shard's Read delivered. deliver runs on the
// shard's reading goroutine; the test's monitor reads the log concurrently.
type shardLog struct {
	id  string
	run time.Time // when the instances were released

	mu       sync.Mutex
	recs     []types.Record
	first    time.Duration // from run to the first record; 0 = none yet
	subs     int           // subscriptions opened
	resubs   int           // of which resubscriptions
	readErr  error         // what Read returned
	finished bool          // Read returned
}

func (s *shardLog) deliver(_ context.Context, b shard.Batch) error {
	if len(b.Records) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == 0 {
		s.first = time.Since(s.run)
	}
	s.recs = append(s.recs, b.Records...)
	return nil
}

func (s *shardLog) subscribed(resubscribe bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs++
	if resubscribe {
		s.resubs++
	}
}

func (s *shardLog) progress() (n int, first time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs), s.first
}

// failure is one call of efo.Hooks.Failed.
type failure struct {
	instance int
	shard    string
	class    awserr.Class
	err      error
}

// startupResult is what one strategy's run measured, for the report.
type startupResult struct {
	strategy    string
	ready       []time.Duration // per instance: consumer ARN in hand
	first       []time.Duration // per instance: first record of any of its shards
	allShards   time.Duration   // every shard delivered a record
	steady      time.Duration   // every shard delivered its preload and live records
	calls       map[string]int  // server-side deltas, SDK retries included
	throttled   map[string]int  // server-side deltas
	registerOK  int             // successful RegisterStreamConsumer (SDK level)
	registerErr map[string]int  // failed RegisterStreamConsumer by code (SDK level)
	failures    int             // Hooks.Failed calls
}

// spread renders min/median/max of durations.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%v/%v/%v", ms(s[0]), ms(med), ms(s[len(s)-1]))
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// counts renders the non-zero entries of m in the order of ops, "-" if none.
func counts(m map[string]int, ops []string) string {
	var parts []string
	for _, op := range ops {
		if n := m[op]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", abbrev(op), n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// abbrev shortens an operation name for the table: RegisterStreamConsumer
// becomes Register, DescribeStreamConsumer DescribeConsumer, and so on.
func abbrev(op string) string {
	switch op {
	case "RegisterStreamConsumer":
		return "Register"
	case "DescribeStreamConsumer":
		return "DescribeConsumer"
	case "ListStreamConsumers":
		return "ListConsumers"
	case "DeregisterStreamConsumer":
		return "Deregister"
	case "SubscribeToShard":
		return "Subscribe"
	}
	return op
}

func codes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// snapshot reads the fake's call and throttle counters for ops.
func snapshot(srv *kinesisfake.Server, ops []string) (calls, throttled map[string]int) {
	calls, throttled = map[string]int{}, map[string]int{}
	for _, op := range ops {
		calls[op] = srv.Calls(op)
		throttled[op] = srv.Throttled(op)
	}
	return calls, throttled
}

func delta(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for op, n := range after {
		d[op] = n - before[op]
	}
	return d
}
