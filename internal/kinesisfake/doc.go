// Package kinesisfake is an in-process fake of Amazon Kinesis Data Streams
// with enhanced fan-out, for tests and local development. It serves the AWS
// JSON 1.1 protocol over real sockets, so the aws-sdk-go-v2 kinesis client
// talks to it unchanged:
//
//	srv, err := kinesisfake.New(kinesisfake.TLS(), kinesisfake.Stream("orders", 4))
//	...
//	defer srv.Close()
//	client := srv.NewClient() // or kinesis.New with BaseEndpoint srv.Endpoint()
//	                          // and HTTPClient srv.HTTPClient()
//
// # Serving
//
// The server listens on 127.0.0.1:0 unless ListenAddr says otherwise. A plain
// listener serves HTTP/1.1 and unencrypted HTTP/2 (h2c with prior knowledge);
// with TLS it serves HTTPS with a generated self-signed certificate and HTTP/2
// through ALPN, as AWS serves SubscribeToShard. HTTPClient returns a client
// that trusts the certificate. Request signatures are not checked.
//
// # Operations
//
// CreateStream, DeleteStream, DescribeStream, DescribeStreamSummary,
// ListStreams, ListShards, PutRecord, PutRecords, GetShardIterator,
// GetRecords, SplitShard, MergeShards, UpdateShardCount, UpdateMaxRecordSize,
// UpdateStreamRecordDistributionStrategy, RegisterStreamConsumer,
// DescribeStreamConsumer, ListStreamConsumers, DeregisterStreamConsumer,
// DescribeAccountSettings and SubscribeToShard. Each lives in a file of its
// own that starts with a "Behavior:" comment saying what AWS does and what
// the fake does where they differ or AWS is vague. Other operations answer
// UnknownOperationException. Streams are named by StreamName or StreamARN
// wherever AWS accepts either; ARNs are
// arn:aws:kinesis:<region>:<account>:stream/<name> (Region and Account
// options, default us-east-1 and 000000000000) and consumer ARNs add
// /consumer/<name>:<creation epoch seconds>.
//
// Sequence numbers are 56-digit decimal strings, strictly increasing within a
// shard, each above its shard's StartingSequenceNumber; shard ids are
// shardId-000000000000 and up; CreateStream splits the 128-bit hash key space
// evenly. Retention is reported as 24 hours, but records are trimmed only
// when a test calls TrimShard (see retention.go).
//
// # Design
//
// One goroutine owns all Kinesis state (streams, shards, records, consumers,
// quotas); handlers hand it closures and wait. A subscription that has sent
// everything asks the state goroutine for a channel that is closed when the
// shard gets a record, and waits on it; nothing polls. Records are immutable
// once stored, so a handler encodes them after its turn on the state goroutine
// without copying. Close ends subscriptions, closes connections and waits for
// every goroutine the server started.
//
// # Options (timing knobs and switches)
//
//   - ListenAddr(addr), TLS(), Region(r), Account(id), Logger(l)
//   - Stream(name, shards, opts...): streams created ACTIVE at New; opts
//     MaxRecordKiB(kib) (records up to 10 MiB, since 2025), OnDemand() and
//     AutoDistribution() (records placed by the stream, since 2026; see
//     stream_props.go)
//   - OnDemandAdvantage(): 50 consumers a stream instead of 20
//   - Quotas(on): AWS quotas, default on; WriteQuotas(on): per-shard write
//     quotas, default off so tests can load data quickly
//   - StreamStatusDelay(d): time CREATING, UPDATING (after a reshard) and
//     DELETING; default 0
//   - ConsumerActivationDelay(d), ConsumerDeletionDelay(d): time a consumer is
//     CREATING and DELETING; default 3s each
//   - IteratorLifetime(d): shard iterator validity; default 5m
//   - SubscriptionLifetime(d): SubscribeToShard stream length; default 5m
//   - SubscriptionHeartbeat(d): longest gap between events; default 5s
//   - SubscribeTakeoverWindow(d): the "within 5 seconds" rule; default 5s
//   - MaxEventBytes(n), MaxEventRecords(n): bounds of one event; default
//     1 MiB and 10,000
//   - ShardEndWithRecords(on): the last records of a closed shard come with
//     the shard end (default) or before an empty end response
//
// # Quotas
//
// With Quotas(true) (the default) the fake enforces, with token buckets whose
// burst equals their rate:
//
//   - GetRecords: 5 calls/s and 2 MiB/s per shard
//     (ProvisionedThroughputExceededException; a 10 MiB response blocks the
//     shard for 4-5 s)
//   - GetShardIterator: 5 calls/s per shard (ProvisionedThroughputExceeded)
//   - SubscribeToShard: 1 call/s per consumer and shard (LimitExceeded); a
//     consumer's subscription sends at most 2 MiB/s (it waits, never fails)
//   - RegisterStreamConsumer: 5/s per account, at most 5 consumers CREATING
//     per account and 20 consumers per stream (LimitExceeded)
//   - DescribeStreamConsumer 20/s and ListStreamConsumers 5/s per stream;
//     DeregisterStreamConsumer 5/s, DescribeStreamSummary 20/s and
//     DescribeStream 10/s per account; ListShards 1000/s per stream
//     (LimitExceeded)
//
// With WriteQuotas(true), PutRecord and PutRecords take 1,000 records/s and
// 1 MiB/s per shard (ProvisionedThroughputExceededException; PutRecords fails
// the entries over budget). The SubscribeToShard 5-second rule is not a quota:
// SubscribeTakeoverWindow governs it. Throttled(op) counts rejections.
//
// # Fault injection
//
// Faults apply to calls received after they are set:
//
//   - FailNext(op, n, code): the next n calls of op answer the AWS error code
//     (HTTP 500 for InternalFailureException, 503 for ServiceUnavailable, 400
//     otherwise). For SubscribeToShard this is an HTTP error before the event
//     stream starts.
//   - DelayNext(op, n, d): the next n calls of op wait d first.
//   - DropNext(op, n): the next n calls of op get no answer: HTTP/1.1 closes
//     the connection, HTTP/2 resets the stream.
//   - DropSubscriptionAfter(shard, n, k): the next n subscriptions to shard
//     ("" = any) lose their connection after k events.
//   - StallSubscriptionAfter(shard, n, k, d): the next n subscriptions send
//     nothing, heartbeats included, for d after k events, connection open.
//   - FailSubscriptionAfter(shard, n, k, code): the next n subscriptions get an
//     exception frame with code after k events, then end.
//   - Control(op, fn): fn sees every call of op ("" = all) first and may
//     answer it with any status and body (ErrorBody builds AWS errors); the
//     returned func removes it.
//
// Events are counted without the initial-response, so k = 0 strikes right
// after it. Every subscription takes at most one subscription fault. A call
// is delayed first, then dropped or failed. Calls(op) counts every call
// received, failed and faulted ones included.
//
// # Notes on aws-sdk-go-v2 (v1.57.0, smithy-go v1.28.9) found with this fake
//
//   - Over plain HTTP/1.1, net/http reads a request body once more after
//     sending it; the SDK closes the body as soon as the answer is back, and
//     the closed body's WriteTo returns io.EOF, so the transport closes the
//     connection while the SDK still reads a large answer ("deserialization
//     failed ... use of closed network connection", about 1 call in 100
//     against a fast local server). HTTPClient's transport avoids it; for
//     other clients the server waits 1 ms before large HTTP/1.1 answers,
//     which makes it rare. TLS (HTTP/2) is not affected.
//   - The SDK decodes event streams with state kept in the client's protocol
//     value, shared by every SubscribeToShard stream of one client: reading
//     two streams at once is a data race (go test -race). Give each call its
//     own protocol (the option sdkopt.OwnProtocol), or use one client per
//     subscription.
//   - Over HTTP/1.1 the SDK reports a connection lost mid-stream as a clean
//     end of the event stream (Err() is nil); over HTTP/2 it is an error.
//
// # Helpers
//
// For tests, without HTTP, quotas or faults: CreateStream, DeleteStream, Put,
// PutWithHashKey, PutToShard, SplitShard, MergeShards, TrimShard, Shards,
// ShardRecords, RegisterConsumer, ConsumerARN, StreamARN, Subscriptions.
package kinesisfake
