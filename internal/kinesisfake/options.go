package kinesisfake

import (
	"log/slog"
	"net/http"
	"time"
)

// Opt configures a Server at New. Every timing knob is an option rather than a
// package variable, so tests with different settings can run in parallel.
type Opt func(*config)

type config struct {
	listen string
	tls    bool
	region string
	acct   string

	streams []presetStream

	quotas      bool
	writeQuotas bool

	streamDelay      time.Duration
	consumerActivate time.Duration
	consumerDelete   time.Duration

	iteratorLifetime time.Duration
	subLifetime      time.Duration
	subHeartbeat     time.Duration
	subTakeover      time.Duration
	maxEventBytes    int
	maxEventRecords  int

	shardEndWithRecords bool

	// advantage: the account has On-demand Advantage (50 consumers a
	// stream).
	advantage bool

	// otherAccount: the streams belong to another account than the caller's
	// (see OtherAccount).
	otherAccount bool

	// onRequest, when set, sees every request's operation and headers.
	onRequest func(op string, h http.Header)

	logger *slog.Logger

	// clock, when set (only by this package's tests), is the state's time
	// instead of time.Now.
	clock func() time.Time
}

type presetStream struct {
	name   string
	shards int
	opts   []StreamOpt
}

func (p presetStream) props() streamProps { return applyStreamOpts(p.opts) }

func applyStreamOpts(opts []StreamOpt) streamProps {
	props := defaultProps()
	for _, o := range opts {
		o(&props)
	}
	return props
}

func defaultConfig() config {
	return config{
		listen:              "127.0.0.1:0",
		region:              "us-east-1",
		acct:                "000000000000",
		quotas:              true,
		consumerActivate:    3 * time.Second,
		consumerDelete:      3 * time.Second,
		iteratorLifetime:    5 * time.Minute,
		subLifetime:         5 * time.Minute,
		subHeartbeat:        5 * time.Second,
		subTakeover:         5 * time.Second,
		maxEventBytes:       1 << 20,
		maxEventRecords:     10000,
		shardEndWithRecords: true,
	}
}

// ListenAddr sets the TCP address to listen on (default "127.0.0.1:0", a free
// loopback port).
func ListenAddr(addr string) Opt { return func(c *config) { c.listen = addr } }

// TLS serves HTTPS with a freshly generated self-signed certificate and
// negotiates HTTP/2 through ALPN, as AWS serves SubscribeToShard. Use
// Server.HTTPClient for a client that trusts the certificate.
func TLS() Opt { return func(c *config) { c.tls = true } }

// Region sets the region used in ARNs (default us-east-1). Clients must use the
// same region, because ARNs from another region are not found.
func Region(r string) Opt { return func(c *config) { c.region = r } }

// Account sets the 12-digit account id used in ARNs (default 000000000000).
func Account(id string) Opt { return func(c *config) { c.acct = id } }

// OtherAccount serves the streams as another account's, shared with the
// caller by a resource policy: AWS then finds a stream only by its ARN. A
// call that names a stream by StreamName is answered ResourceNotFound (the
// name is looked up in the caller's account), and one that needs a stream
// but carries no StreamARN (GetRecords with an iterator only) AccessDenied.
// Consumer calls may name the consumer by its ConsumerARN instead, and
// ListShards may continue by its NextToken alone. Server.CallsWithoutARN
// counts the refusals per operation. CreateStream and ListStreams, the
// owner's calls, are served as before.
func OtherAccount() Opt { return func(c *config) { c.otherAccount = true } }

// OnDemandAdvantage gives the account On-demand Advantage (an account
// setting since late 2025): a stream takes up to 50 registered consumers
// instead of 20.
func OnDemandAdvantage() Opt { return func(c *config) { c.advantage = true } }

// consumerLimit is how many consumers a stream takes.
func (c *config) consumerLimit() int {
	if c.advantage {
		return maxConsumersAdvantage
	}
	return maxConsumers
}

// OnRequest calls f with the operation and headers of every request, before
// it is served: what a test needs to see how calls are signed.
func OnRequest(f func(op string, h http.Header)) Opt { return func(c *config) { c.onRequest = f } }

// Stream creates an ACTIVE stream with the given number of shards at New;
// opts set its record size and placement (default: PROVISIONED, records up
// to 1 MiB, placed by partition key).
func Stream(name string, shards int, opts ...StreamOpt) Opt {
	return func(c *config) { c.streams = append(c.streams, presetStream{name, shards, opts}) }
}

// Quotas turns the AWS service quotas on or off (default on): per-shard
// GetRecords and GetShardIterator limits, SubscribeToShard call rate and
// per-consumer read rate, and the control-plane TPS and consumer-count limits.
// Write quotas have their own switch, WriteQuotas.
func Quotas(on bool) Opt { return func(c *config) { c.quotas = on } }

// WriteQuotas turns the per-shard write quotas (1,000 records/s and 1 MiB/s)
// on or off (default off, so that tests can load data quickly).
func WriteQuotas(on bool) Opt { return func(c *config) { c.writeQuotas = on } }

// StreamStatusDelay sets how long a stream stays CREATING after CreateStream,
// UPDATING after a reshard and DELETING after DeleteStream (default 0: status
// changes are immediate). Streams created with the Stream option or the
// CreateStream helper are ACTIVE at once.
func StreamStatusDelay(d time.Duration) Opt { return func(c *config) { c.streamDelay = d } }

// ConsumerActivationDelay sets how long a registered consumer stays CREATING
// before it becomes ACTIVE (default 3s; AWS takes a few seconds).
func ConsumerActivationDelay(d time.Duration) Opt {
	return func(c *config) { c.consumerActivate = d }
}

// ConsumerDeletionDelay sets how long a deregistered consumer stays DELETING
// before it disappears (default 3s).
func ConsumerDeletionDelay(d time.Duration) Opt {
	return func(c *config) { c.consumerDelete = d }
}

// IteratorLifetime sets how long a shard iterator stays valid (default 5
// minutes, as AWS).
func IteratorLifetime(d time.Duration) Opt { return func(c *config) { c.iteratorLifetime = d } }

// SubscriptionLifetime sets how long a SubscribeToShard stream lasts before it
// ends cleanly (default 5 minutes, as AWS).
func SubscriptionLifetime(d time.Duration) Opt { return func(c *config) { c.subLifetime = d } }

// SubscriptionHeartbeat sets the longest time a subscription goes without an
// event: when no record arrives for that long, an empty event carrying the
// current ContinuationSequenceNumber is sent (default 5s; AWS does not document
// its cadence, clients see an empty event every few seconds on an idle shard).
func SubscriptionHeartbeat(d time.Duration) Opt { return func(c *config) { c.subHeartbeat = d } }

// SubscribeTakeoverWindow sets the window after a successful SubscribeToShard
// during which another subscribe of the same consumer and shard fails with
// ResourceInUseException (default 5s, as AWS). A subscribe after the window
// takes the subscription over. Zero lets every subscribe take over at once.
func SubscribeTakeoverWindow(d time.Duration) Opt { return func(c *config) { c.subTakeover = d } }

// MaxEventBytes bounds the record bytes (data plus partition key) of one
// SubscribeToShardEvent (default 1 MiB). An event always carries at least one
// record if one is available: a record of up to 10 MiB, on a stream that
// takes them, comes in an event of its own (AWS does not say more of how
// it sizes events).
func MaxEventBytes(n int) Opt { return func(c *config) { c.maxEventBytes = n } }

// MaxEventRecords bounds the number of records in one SubscribeToShardEvent
// (default 10,000).
func MaxEventRecords(n int) Opt { return func(c *config) { c.maxEventRecords = n } }

// ShardEndWithRecords chooses whether the response that returns the last
// records of a closed shard already carries the shard end (GetRecords: no
// NextShardIterator and ChildShards; SubscribeToShard: a null
// ContinuationSequenceNumber and ChildShards). Default true; false sends the end
// in a separate, empty response, as AWS also does at times. Clients must handle
// both.
func ShardEndWithRecords(on bool) Opt { return func(c *config) { c.shardEndWithRecords = on } }

// Logger sets the logger for operations (each call at debug level, faults and
// subscription ends at info). Default: discard.
func Logger(l *slog.Logger) Opt { return func(c *config) { c.logger = l } }
