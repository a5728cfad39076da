package input

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/metricdef"
)

// Name is the component name the input registers under.
const Name = "aws_kinesis_streams"

// Field names: the config contract, which tests, docs and example configs use.
const (
	fStreams                = "streams"
	fRegion                 = "region"
	fEndpoint               = "endpoint"
	fTLS                    = "tls"
	fCredentials            = "credentials"
	fCredProfile            = "profile"
	fCredID                 = "id"
	fCredSecret             = "secret"
	fCredToken              = "token"
	fCredRole               = "role"
	fCredRoleExternalID     = "role_external_id"
	fCredFromInput          = "from_input"
	fReader                 = "reader"
	fStartFrom              = "start_from"
	fStartTimestamp         = "start_timestamp"
	fEFO                    = "efo"
	fEFOConsumerName        = "consumer_name"
	fEFORegistration        = "registration"
	fEFOConsumerARNs        = "consumer_arns"
	fEFODeregisterOnClose   = "deregister_on_close"
	fPolling                = "polling"
	fPollingInterval        = "interval"
	fPollingIdleInterval    = "idle_interval"
	fPollingLimit           = "limit"
	fCheckpoint             = "checkpoint"
	fCheckpointDir          = "dir"
	fCheckpointLimit        = "limit"
	fCheckpointCommitPeriod = "commit_period"
	fDynamo                 = "dynamodb"
	fDynamoTable            = "table"
	fDynamoCreate           = "create"
	fDynamoEndpoint         = "endpoint"
	fDynamoLeasePeriod      = "lease_period"
	fDynamoInstanceID       = "instance_id"
	fDynamoStealLimit       = "steal_limit"
	fDynamoBalance          = "balance"
	fDynamoRegion           = "region"
	fDynamoGroup            = "group"
	fDeaggregate            = "deaggregate"
	fMemoryLimit            = "memory_limit"
	fShardDiscoveryInterval = "shard_discovery_interval"
	fBatching               = "batching"
	fStrictOrder            = "strict_order"
)

// Values of enum fields.
const (
	registrationLazy  = "lazy"
	registrationEager = "eager"
	registrationNone  = "none"

	startLatest      = "latest"
	startTrimHorizon = "trim_horizon"
	startAtTimestamp = "at_timestamp"
)

// The group name's lint rule.
const (
	groupPattern  = lease.GroupPattern
	groupExpected = lease.GroupExpected
)

// credentialFields are the fields of credentials, the input's and the lease
// table's.
func credentialFields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringField(fCredProfile).Description("A profile of the shared credentials file.").Default(""),
		service.NewStringField(fCredID).Description("A static access key id.").Default(""),
		service.NewStringField(fCredSecret).Description("The secret of the static access key.").Default("").Secret(),
		service.NewStringField(fCredToken).Description("The session token of static temporary credentials.").Default("").Secret(),
		service.NewStringField(fCredRole).Description("The ARN of a role to assume with the credentials above.").Default(""),
		service.NewStringField(fCredRoleExternalID).Description("The external id to present when assuming the role.").Default(""),
	}
}

// defaultCheckpointDir is used when checkpoint.dir is not set: positions are
// never kept only in memory.
const defaultCheckpointDir = "./kinesis_checkpoints"

// Spec returns the configuration spec of the input. The documentation of the
// input is generated from it.
func Spec() *service.ConfigSpec {
	registerCheckMethod()
	movedLets, movedArm := movedLint()
	return service.NewConfigSpec().
		Beta().
		Categories("Services", "AWS").
		Summary("Reads records from one or more AWS Kinesis data streams, by Enhanced Fan-Out or by polling, and checkpoints a shard position only once every record before it has been acknowledged.").
		Description(`
Every shard of every stream is read by its own reader, in order. Records are handed to the pipeline in batches, one Benthos batch never mixing shards. A shard's position is checkpointed only once the pipeline has acknowledged every record up to it, so a restart after a clean stop neither loses nor repeats a record, and a restart after a crash repeats only records that were not yet acknowledged and checkpointed.

### Readers

- `+"`efo`"+` (the default): Enhanced Fan-Out. A registered stream consumer subscribes to each shard (SubscribeToShard) and gets a dedicated 2 MiB/s per shard; records are pushed over HTTP/2 about 70 ms after they arrive. Subscriptions are renewed from where they stopped (AWS ends each after 5 minutes), at most one subscribe call per second per shard, with jittered backoff on errors; a subscription silent for 35 s is replaced. A slow pipeline stops the reading of the HTTP/2 stream rather than growing memory.
- `+"`polling`"+`: GetShardIterator and GetRecords. The read throughput of a shard (5 calls/s, 2 MiB/s) is shared by every polling consumer of the stream.

### Resharding

Shards are discovered with ListShards (all pages) when the input starts and every `+"`shard_discovery_interval`"+`. A child shard is read only once every parent (both parents of a merge) has been read to its end and that end checkpointed, so records of one partition key stay in order across a split or a merge, also across restarts. A closed parent with unread records is always read first.

### Checkpoints

The embedded store (`+"`checkpoint.dir`"+`) keeps one JSON file per stream in a directory, replaced atomically on every commit (written, fsynced, renamed), so a crash at any moment leaves the last committed positions readable. It serves one instance: a second process using the same directory for the same stream is refused. When `+"`checkpoint.dir`"+` is not set the store is the directory `+"`"+defaultCheckpointDir+"`"+` under the working directory: positions are never kept only in memory.

`+"`start_from`"+` applies only to shards that have no checkpoint. `+"`latest`"+` is pinned to the time the input first saw the stream and that time is stored, so a restart before the first record arrives loses nothing. Shards created after the input first started are read from their beginning. A stream deleted and created again under the same name (found by its creation time, or by a shard id that starts at another sequence number) drops the old checkpoints, with a warning, and is read afresh: `+"`latest`"+` then reads the new stream from its beginning, since all of it was written after the input first saw the name; the new checkpoints are kept across restarts.

A checkpoint older than the stream's retention period cannot be resumed: its record was trimmed and Kinesis refuses the start with InvalidArgumentException. The shard is then read from the oldest record left (TRIM_HORIZON), dropping every record at or before the checkpoint, so nothing is repeated; a warning names the checkpoint and `+"`kinesis_checkpoints_expired`"+` counts it. Records after the checkpoint that passed the retention period too were never read and are lost.

A checkpoint the shard cannot hold is never answered by skipping: one below the shard's first sequence number or above the last of a closed shard, or one Kinesis refuses while records at or before it are still in the shard (a sequence number of another shard, or beyond every record of this one). The shard is then not read; an error names the position, where it is kept and the `+"`benthos-kinesis checkpoint set`"+` command that sets it, and `+"`kinesis_shard_stopped`"+` is 1 for the shard. A refused one is tried again now and then (up to every 5 minutes), and read from once Kinesis takes it. While no stream can be read at all (every shard it would read stopped so, or on stored state that cannot be read, or its shards not listed, or its checkpoints not stored (a lease table out of reach), for 30 s with none read), the input reports itself not connected: Benthos's `+"`/ready`"+` answers 503 and an error that says why is logged every few seconds, until a shard can be read again.

What is stored for a shard and cannot be read is never replaced by another position: a checkpoint file with anything after its JSON document is refused; a shard entry whose position is not a sequence number or whose start time is before 2013, a lease item with an attribute of another type, a kind this input does not write, a second item for the shard or an item of another schema at its key, and an end stored for a shard ListShards lists open each leave that shard unread (the others are read), with an error, repeated every 5 minutes, naming the file or table, the item, the attribute, the value and the `+"`benthos-kinesis checkpoint set`"+` command that sets it again (`+"`--force`"+` replaces a lease item while instances run); `+"`kinesis_broken_checkpoints`"+` counts such shards and `+"`checkpoint show`"+` prints them BROKEN.

A read that reports a shard's end (GetRecords without a next iterator, a fan-out event without a continuation) is taken only once ListShards lists the shard closed; otherwise the shard is read on and `+"`kinesis_shard_ends_unconfirmed`"+` counts it. At start the input says where its checkpoints are kept (the directory's absolute path, or the lease table) and, per stream, how many shards had a checkpoint, or that none had and where reading starts.

### Acknowledgements

At most `+"`checkpoint.limit`"+` records per shard are in flight unacknowledged (a read is split to fit the room left, and so is an aggregate of many user records; a batch of a `+"`batching`"+` policy larger than the limit is let through alone, and a policy without a count is flushed once it holds the limit); the shard's reading pauses until acknowledgements make room. Records acknowledged behind one that is not free their room at once: an output that batches by count without a period may hold records until more arrive, and the shard must stay free to send them. Keep such an output's batch count within `+"`checkpoint.limit`"+`, or give it a period: a shard's children are read only once all of its records are acknowledged, so records held at a shard's end would wait for ever on a stream with a single open shard. A record that the pipeline rejects (nacks) is delivered again when `+"`auto_replay_nacks`"+` is true (the default): first at once, then after a pause growing from 100 ms to 5 s, and once due before newer batches; when the error names the failed messages of a batch, only those come again. When it is false the rejected record is not delivered again in this run, but its shard's checkpoint stays before it, so it is read again after a restart, and the children of that shard are not read until then. A replay reaches the output after the batches of its shard that the pipeline already holds; set `+"`strict_order`"+` to keep each shard's order across rejections. While a rejected record holds a shard's checkpoint, the shard reads on within the limit: the gauge kinesis_records_past_checkpoint counts the records read past the checkpoint (a restart would read them all again), and a warning comes when it passes ten times `+"`checkpoint.limit`"+`.

### Metadata

Each message carries:

- kinesis_stream: the stream name
- kinesis_shard: the shard id
- kinesis_partition_key
- kinesis_sequence_number
- kinesis_sub_sequence_number: the index of a user record inside a KPL aggregated record (aggregated records only)
- kinesis_explicit_hash_key: a user record's explicit hash key, when its producer set one (aggregated records only)
- kinesis_hash_key_out_of_range: true on a user record of an aggregate whose hash key lies outside the shard's hash key range (aggregated records only)
- kinesis_arrival_timestamp: RFC 3339
- kinesis_millis_behind_latest: how far the read was behind the tip of the shard when the record was read

### KPL aggregated records

With `+"`deaggregate`"+` (the default), a record written by the Kinesis Producer Library as an aggregate becomes one message per user record, with the user record's partition key. Checkpoints hold the sub-sequence number: a restart inside an aggregate resumes at that record and skips the user records already acknowledged. An aggregate's user records are converted and handed out a part at a time, like the records of a large read, so `+"`checkpoint.limit`"+` bounds what one aggregate holds in memory: a Kinesis record of 1 MiB can hold 166,650 empty user records. Every user record is delivered, also one whose hash key lies outside the shard's range: the KPL aggregates only records bound for one shard, but other aggregators (the kinesis-aggregation libraries, producers that route an aggregate by one explicit hash key) mix keys, and after a reshard an aggregate may hold keys of a sibling shard. A Kinesis record is stored in one shard only, so no other shard delivers such a user record; it carries the metadata kinesis_hash_key_out_of_range: true, is counted in kinesis_hash_key_out_of_range, and the first one of a shard is logged as a warning. A stream that places records itself (record distribution AUTO, on-demand streams since 2026) ignores partition keys, so there no user record is checked or flagged: nearly all would be outside, and none is misplaced; the input learns the strategy from DescribeStreamSummary at start and at most once a minute after (not with `+"`efo.registration: none`"+`, which describes nothing). A corrupt aggregate (bad MD5 digest, broken protobuf) is delivered whole as one message flagged with an error (see `+"`errored()`"+` and the `+"`catch`"+` processor), with metadata kinesis_deaggregation_error saying why; it is logged once and never dropped.

### Metrics

`+metricdef.Markdown()+``).
		Fields(
			service.NewStringListField(fStreams).
				Description("The streams to read, by name or ARN. Several streams may be read at once; they must be in one region.").
				Example([]string{"orders"}).
				Example([]string{"arn:aws:kinesis:us-east-1:123456789012:stream/orders", "clicks"}).
				LintRule(`let s = this.string().trim()
root = if this.type() != "array" && !$s.re_match("^[a-zA-Z0-9_.-]{1,128}$") && !$s.re_match("^arn:aws[a-zA-Z-]*:kinesis:[a-z0-9-]+:[0-9]{12}:stream/[a-zA-Z0-9_.-]{1,128}$") { [ "field streams: %v is neither a stream name (1 to 128 of a-z, A-Z, 0-9, '_', '.', '-') nor a stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)".format($s) ] }`),
			service.NewStringField(fRegion).
				Description("The AWS region of the streams. Empty: the region of a stream ARN, else the AWS SDK default (AWS_REGION, the shared config).").
				Default("").
				Example("us-east-1").
				LintRule(fieldLint(fRegion)),
			service.NewURLField(fEndpoint).
				Description("A custom Kinesis endpoint URL, e.g. a local emulator. Empty: the AWS endpoint of the region. Every call to it but a fan-out subscription has to be answered within "+awsclient.KinesisCallTimeout.String()+" (the AWS SDK's retries included): one that is not fails with an error naming the endpoint, and is retried.").
				Default("").
				Example("http://127.0.0.1:4568").
				LintRule(fieldLint(fEndpoint)).
				Advanced(),
			service.NewTLSToggledField(fTLS).
				Description("Custom TLS settings for the endpoint, e.g. a private certificate authority. Disabled: the system's trust store, with verification.").
				Advanced(),
			service.NewObjectField(fCredentials, credentialFields()...).
				Description("Credentials. Without static ones the standard AWS SDK chain applies: environment, shared profile, web identity, container and instance roles.").
				Advanced(),
			service.NewStringAnnotatedEnumField(fReader, readerDocs()).
				Description("How shards are read.").
				Default(readerKinds[0].name).
				LintRule(enumLint(fReader, readerNames()...)),
			service.NewStringAnnotatedEnumField(fStartFrom, map[string]string{
				startLatest:      "Records that arrive after the input first starts.",
				startTrimHorizon: "The oldest records the streams still retain.",
				startAtTimestamp: "Records that arrived at or after `start_timestamp`.",
			}).
				Description("Where to start reading a shard that has no checkpoint.").
				Default(startLatest).
				LintRule(enumLint(fStartFrom, startLatest, startTrimHorizon, startAtTimestamp)),
			service.NewStringField(fStartTimestamp).
				Description("With `start_from: at_timestamp`: an RFC 3339 time, or a duration back from the input's first start (e.g. `-24h`), stored as the time it meant then.").
				Default("").
				Example("2024-05-01T00:00:00Z").
				Example("-24h").
				LintRule(`root = if this != "" && !this.re_match("^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$") && !this.re_match("^-([0-9.]+(ns|us|µs|ms|s|m|h))+$") { [ "field start_timestamp: %v is neither an RFC 3339 time (e.g. 2024-05-01T00:00:00Z) nor a duration back from now (e.g. -24h)".format(this) ] }`),
			service.NewObjectField(fEFO,
				service.NewStringField(fEFOConsumerName).
					Description("The name of the stream consumer (the same for every stream). Required unless `registration` is `none`. Every instance of one application uses the same name.").
					Default("").
					Example("orders-to-s3"),
				service.NewStringAnnotatedEnumField(fEFORegistration, map[string]string{
					registrationLazy:  "Each instance describes the consumer by name at start and registers it if it is absent (the first wins; the others wait for it to become ACTIVE); a consumer deleted while in use is registered again (a subscription answered ResourceNotFound describes the consumer first: if it is still ACTIVE, the shard or the stream is what is missing, and the error is retried with backoff without registering). Simple; at high instance counts startup is bounded by the DescribeStreamConsumer quota (20/s per stream).",
					registrationEager: "The consumer is registered beforehand, once (`benthos-kinesis efo register --stream S --consumer-name N`); instances only describe it. For many instances.",
					registrationNone:  "The consumer ARNs are given in `consumer_arns`; the input makes no consumer or stream description call at all. For very many instances, or credentials without describe rights.",
				}).
					Description("How the stream consumer is registered and found.").
					Default(registrationLazy).
					LintRule(enumLint(fEFO+"."+fEFORegistration, registrationLazy, registrationEager, registrationNone)),
				service.NewStringMapField(fEFOConsumerARNs).
					Description("With `registration: none`: the consumer ARN of every stream, keyed by the stream as it is written in `streams`.").
					Default(map[string]any{}).
					Example(map[string]any{"orders": "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/orders-to-s3:1700000000"}),
				service.NewBoolField(fEFODeregisterOnClose).
					Description("With `registration: lazy`: deregister the consumer when the input closes cleanly. Only for a single instance: another instance still reading with the consumer would lose its subscriptions. Never done on a failure. A deregistration that gets no answer within 10 s is given up: the close then fails with an error naming the consumer, which may still be registered (remove it with `benthos-kinesis efo deregister`).").
					Default(false),
			).
				Description("Settings of the `efo` reader."),
			service.NewObjectField(fPolling,
				service.NewDurationField(fPollingInterval).
					Description("The gap between two GetRecords calls on one shard; at least 200ms (Kinesis allows 5 calls per second per shard, shared by every polling consumer).").
					Default("200ms").
					LintRule(durationAtLeast(fPolling+"."+fPollingInterval, 200, "200ms: Kinesis allows 5 GetRecords calls per second per shard")),
				service.NewDurationField(fPollingIdleInterval).
					Description("The longest gap between two GetRecords calls on an idle shard. Each read that comes back empty at the shard's tip (no records, `MillisBehindLatest` 0) doubles the gap from `interval`, up to this; the first read that brings records, or finds the shard behind, brings it back to `interval`. 512 idle shards then make 256 calls a second instead of 2,560, and a record written after an idle spell is read within about this long. At or below `interval`: never back off (a shard is then read every `interval`, idle or not).").
					Default("2s").
					Advanced(),
				service.NewIntField(fPollingLimit).
					Description("The most records one GetRecords call returns, 1 to 10000. A call asks for fewer when the shard's records are large enough that fewer make 1 MiB: five such calls a second already exceed a shard's 2 MiB/s read quota, and a larger read would only hold more memory per shard.").
					Default(10000).
					LintRule(`root = if this < 1 || this > 10000 { [ "field polling.limit: %v is not within 1 to 10000 records per GetRecords call".format(this) ] }`),
			).
				Description("Settings of the `polling` reader.").
				Advanced(),
			service.NewObjectField(fCheckpoint,
				service.NewStringField(fCheckpointDir).
					Description("The directory of the embedded checkpoint store (single instance). Empty: `"+defaultCheckpointDir+"`.").
					Default(""),
				service.NewIntField(fCheckpointLimit).
					Description("The most unacknowledged records per shard; reading the shard pauses at this limit.").
					Default(1024).
					LintRule(fmt.Sprintf(`root = if this < 1 || this > %d { [ "field checkpoint.limit: %%v: expected 1 to %d unacknowledged records per shard".format(this) ] }`, maxCheckpointLimit, maxCheckpointLimit)),
				service.NewDurationField(fCheckpointCommitPeriod).
					Description("How often acknowledged positions are committed to the store. They are also committed at shard end and when the input closes.").
					Default("1s").
					LintRule(durationAtLeast(fCheckpoint+"."+fCheckpointCommitPeriod, 0.000001, "a positive duration, e.g. 1s")),
				service.NewObjectField(fDynamo,
					service.NewStringField(fDynamoTable).
						Description("The DynamoDB table that holds the leases and checkpoints of every instance reading these streams. Instances with the same table share the shards of a stream between them.").
						LintRule(`root = if this != "" && !this.re_match("^[a-zA-Z0-9_.-]{3,255}$") { [ "field checkpoint.dynamodb.table: %v: expected a DynamoDB table name: 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.'".format(this) ] }`),
					service.NewBoolField(fDynamoCreate).
						Description("Create the table (on-demand billing, hash key `leaseKey`) if it does not exist, and wait until it is ACTIVE.").
						Default(false),
					service.NewStringField(fDynamoGroup).
						Description("The group of pipelines these instances belong to, like a Kafka consumer group: instances of one group share each stream's shards between them, and every group reads every record of the stream. Several pipelines (say an archiver and an indexer) can keep their leases in one table, each with its own group; their leases never meet. Empty: the table is the group. Instances of one group should run the same pipeline: in the benthos-kinesis binary, one whose main config differs from another's (its input, buffer, pipeline, output or resources sections, instance ids aside; resource files of `-r` are not compared) is reported with a warning naming both and the gauge kinesis_group_config_mismatch, as two pipelines in one group each see only part of the stream. Each instance reads the whole table every lease cycle, so groups share its read cost: a table of many large groups costs as much to scan as their shards together. By fan-out, give each group its own `efo.consumer_name`. 1 to 128 of a-z, A-Z, 0-9, '_', '-', '.'.").
						Default("").
						Example("archiver").
						LintRule(`root = if this != "" && !this.re_match("`+groupPattern+`") { [ "field checkpoint.dynamodb.group: %v: `+groupExpected+`".format(this) ] }`),
					service.NewStringField(fDynamoRegion).
						Description("The region of the table, when it is not the stream's: one table per region can serve streams of several regions. Empty: the input's region.").
						Default("").
						Example("eu-west-1").
						LintRule(fieldLint(fCheckpoint+"."+fDynamo+"."+fDynamoRegion)).
						Advanced(),
					service.NewObjectField(fCredentials, append(credentialFields(),
						service.NewBoolField(fCredFromInput).
							Description("Start from the input's `credentials`: the fields set here replace theirs (a `profile` or an `id` the input's profile and static keys; a `role` the input's role and external id). false: start from the standard AWS SDK chain (environment, shared profile, web identity, container and instance roles), so that the table is reached as the instance itself while the input assumes a role of the stream's account.").
							Default(true))...).
						Description("The credentials of the table's calls, when the table lives in another account than the stream (say the stream is another team's and the table is yours). Unset: the input's `credentials`.").
						Advanced(),
					service.NewURLField(fDynamoEndpoint).
						Description("A custom DynamoDB endpoint URL, e.g. a local DynamoDB. Its tls settings are the input's. Every call to it has to be answered within `lease_period` (at most "+awsclient.DynamoDBCallTimeout.String()+", the AWS SDK's retries included): one that is not fails with an error naming the endpoint, and is retried.").
						Default("").
						LintRule(fieldLint(fCheckpoint+"."+fDynamo+"."+fDynamoEndpoint)),
					service.NewDurationField(fDynamoLeasePeriod).
						Description("An instance whose heartbeat (one write every third of this) and lease have not moved for this long loses the lease to another instance. Shorter: a dead instance's shards move sooner; longer: fewer DynamoDB calls (a heartbeat and a scan of the table per instance every third of it) and more slack for pauses. A dead instance's shards are read again within about 1.5 lease periods.").
						Default("10s").
						LintRule(durationAtLeast(fCheckpoint+"."+fDynamo+"."+fDynamoLeasePeriod, 1000, "1s")),
					service.NewStringField(fDynamoInstanceID).
						Description("The name of this instance in the table (`leaseOwner`). Empty: the host name and a random suffix, new at every start. Two running instances never share one: a process started under a name whose presence in the table moves refuses to start; one whose presence did not move for `lease_period` (its process died) takes the name over after watching it that long, and the leases of the earlier process only once they expire.").
						Default("").
						Advanced(),
					service.NewIntField(fDynamoStealLimit).
						Description("The most leases an instance asks other live instances to hand over per lease cycle (a third of `lease_period`) while it holds fewer than its share; each is handed over after its last checkpoint. 0: never ask (an instance then gets only free and expired leases).").
						Default(4).
						Advanced(),
					service.NewStringEnumField(fDynamoBalance, balanceThroughput, balanceCount).
						Description("How instances share a stream's shards. `throughput`: by the bytes a second written to each shard, measured by its holder from the records' arrival times, so that a reader's pauses and catch-ups do not show (smoothed over three lease periods, and kept when a lease moves) and published with its heartbeat, so that the holder of a hot shard holds fewer others. A lease moves by load only for a lasting gain: the busier side drops by more than a tenth of the mean instance load, the lease has not changed hands for five lease periods, and the shards involved do not all weigh about the same (equal shards whose counts are within one never move). Idle streams and shards not measured yet are shared by count. `count`: every instance holds as many shards as every other, give or take one.").
						Default(balanceThroughput).
						LintRule(enumLint(fCheckpoint+"."+fDynamo+"."+fDynamoBalance, balanceThroughput, balanceCount)).
						Advanced(),
				).
					Description("Share the shards of each stream between many instances through a DynamoDB lease table. Leases and checkpoints then live in the table instead of `dir`.").
					Optional(),
			).
				Description("Where and how shard positions are checkpointed."),
			service.NewStringField(fMemoryLimit).
				Description("The memory this input may use for the records of every shard and stream it reads, set once for the container whatever the shard count. Up to half of it bounds the records in flight: those read and not yet acknowledged and those being read (by fan-out, a quarter of that half is what the subscriptions may buffer unread: each subscription's HTTP/2 window is sized so that together they fit, between 16 KiB and 1 MiB). The other half is what the Go heap grows by between collections: in the benthos-kinesis binary, unless `GOMEMLIMIT` is set, the Go runtime's soft memory limit is set to the inputs' `memory_limit` plus 24 MiB for the rest of the process, so that with the binary's own code (about 30 MiB resident) it stays within about `memory_limit` + 55 MiB of resident memory at any shard count up to the one below; a pipeline that holds much memory besides the input (a `buffer`, caches, large output batches) sets `GOMEMLIMIT` itself, to what its container allows or `off`. Each shard read also holds state of its own (goroutines, connections, buffers: about 64 KiB by polling, 80 KiB by fan-out): it comes out of the heap's half up to a quarter of `memory_limit` (about 256 shards by polling in 64 MiB, 200 by fan-out), then out of the records' part, which never goes below an eighth of `memory_limit` (the gauge kinesis_bytes_in_flight_limit is that part now); beyond half of `memory_limit` reading slows, and a warning says so; beyond 5/8 the soft limit grows by the difference, with another warning, rather than collect without pause (the warnings come once the shard count stayed put for 5 s). Give an instance at least twice its shards' own state. A shard that would go beyond the bound waits its turn instead of reading: the shard that got least so far goes first, and a shard takes at most twice its fair share (the bound over the shards read) at a time, but by polling never less than 64 KiB (or a quarter of the bound), so that shards drain a backlog together in reads worth their call. A GetRecords call asks for as many records as fit; a fan-out subscription reads its next event only once there is room for it (the HTTP/2 stream then stops the sender). A record counts its data, partition key and sequence number and 1 KiB for its decoded form and its message; a read's room comes back once all of its records are acknowledged. A read or event larger than the room taken for it takes the bound over by the difference until it is acknowledged. On a stream of records up to 10 MiB (`MaxRecordSizeInKiB`, since 2025) one read can be a single such record whatever was asked for: both readers take the room its records are expected to cost (about the record) before reading it, fan-out from the event's length and polling from the answer's, so a 10 MiB record takes 13 to 18 MiB of the records' part while it is read and about 10 MiB once read, and large records of several shards are read in turn; the default suits such streams (the binary stayed within `memory_limit` + 61 MiB at 256 shards while 8 of them got a 10 MiB record at once), and with less each large record waits for what else is in flight to drain. Records the input's own `batching` holds count once it flushes them. When shards have waited 10 s, no room came back and the pipeline is waiting for records (an output batching by count more records than the bound holds waits for records that wait for room), one read of at least a quarter of the records' part as configured goes over it, and another every 10 s while that lasts, with a warning: the pipeline never stalls for it. An output that is down or slow does not open it: the pipeline then asks for nothing. In bytes, or with a unit: `KiB`, `MiB`, `GiB` (or `KB`, `MB`, `GB`). `0`: no limit, a bound per shard only, and no soft memory limit. The gauge kinesis_bytes_in_flight is what the records hold now.").
				Default(defaultMemoryLimit).
				LintRule(fieldLint(fMemoryLimit)).
				Advanced(),
			service.NewBoolField(fDeaggregate).
				Description("Split KPL aggregated records into their user records.").
				Default(true).
				Advanced(),
			service.NewDurationField(fShardDiscoveryInterval).
				Description("How often to list the shards of each stream, to find new ones after a reshard.").
				Default("10s").
				LintRule(durationAtLeast(fShardDiscoveryInterval, 1000, "1s")).
				Advanced(),
			service.NewBatchPolicyField(fBatching).
				Description("How records of one shard are grouped into Benthos batches. Empty: each read (a GetRecords response or a fan-out event) becomes a batch of at most `checkpoint.limit` records, and while the pipeline is busy the shard's next reads join the batch waiting for it, up to that limit."),
			service.NewBoolField(fStrictOrder).
				Description("Hand a shard's next batch to the pipeline only once its previous batch is acknowledged (as KCL processes a shard), so that a rejected batch, replayed, reaches the output before any later record of its shard, whatever `pipeline.threads` and the output do. Reads that arrive meanwhile join the waiting batch, up to `checkpoint.limit` records. Without it a shard keeps several batches in flight: each batch is handed over in shard order, but a replayed batch can reach the output after later ones, and with several pipeline threads or an output with max_in_flight above 1 so can any batch. When the output reports only some messages of a batch as failed (a Benthos batch error), the others are written and only the failed ones come again, after them. Do not combine it with an output that batches by count without a period: that output would wait for records the shard holds back until it acknowledges, for ever. See the README for what it costs.").
				Default(false).
				Advanced(),
			service.NewBoolField(service.AutoRetryNacksToggleFieldName).
				Description("Deliver a batch that the pipeline rejects (nacks) again, after a pause that grows with its rejections (none the first time, then 100 ms doubling to 5 s) and once due before newer batches, until it is acknowledged; when the error names the failed messages only those come again. The shard reads on meanwhile, and its checkpoint stays before the rejected records. When false a rejected batch is not delivered again in this run, and its shard's checkpoint stays before it, so it is read again after a restart.").
				Default(true),
		).
		Fields(movedFieldSpecs()...).
		LintRule(movedLets+`root = match {
`+movedArm+`  this.start_from.or("latest") == "at_timestamp" && this.start_timestamp.or("") == "" => [ "field start_timestamp: start_from at_timestamp needs an RFC 3339 start_timestamp, e.g. 2024-05-01T00:00:00Z" ],
  this.reader.or("efo") == "efo" && this.efo.registration.or("lazy") != "none" && this.efo.consumer_name.or("") == "" => [ "field efo.consumer_name: reader efo with registration %v needs a consumer name, e.g. my-app".format(this.efo.registration.or("lazy")) ],
  this.reader.or("efo") == "efo" && this.efo.registration.or("lazy") == "none" && this.efo.consumer_arns.or({}).length() == 0 => [ "field efo.consumer_arns: registration none needs the consumer ARN of every stream" ],
  this.checkpoint.dynamodb.type() == "object" && this.checkpoint.dir.or("") != "" => [ "field checkpoint.dir: is set together with checkpoint.dynamodb; with a lease table the checkpoints live in the table, so remove dir" ],
  this.checkpoint.dynamodb.type() == "object" && this.checkpoint.dynamodb.table.or("") == "" => [ "field checkpoint.dynamodb.table: a lease table needs a table name, e.g. orders-leases" ],
  this.start_from.or("latest") != "at_timestamp" && this.start_timestamp.or("") != "" => [ "field start_timestamp: is set but start_from is %v; set start_from: at_timestamp to use it".format(this.start_from.or("latest")) ],
  _ => this.`+checkMethod+`(),
}`).
		Example("Read by Enhanced Fan-Out",
			"Registers the consumer at start if it is absent (lazy registration) and reads every shard through it.",
			`
input:
  aws_kinesis_streams:
    streams: [ orders ]
    region: us-east-1
    efo:
      consumer_name: orders-to-s3
    checkpoint:
      dir: /var/lib/benthos/kinesis
`).
		Example("Read a stream by polling",
			"Reads every shard of one stream from the oldest record, keeping positions in a local directory.",
			`
input:
  aws_kinesis_streams:
    streams: [ orders ]
    region: us-east-1
    reader: polling
    start_from: trim_horizon
    checkpoint:
      dir: /var/lib/benthos/kinesis
`)
}

func init() {
	err := service.RegisterBatchInput(Name, Spec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
			return newInput(conf, mgr)
		})
	if err != nil {
		panic(err)
	}
}

// enumLint is the lint rule of an enum field: a value not among the options
// is named with the field and every option (Benthos' own enum lint says
// neither).
func enumLint(field string, options ...string) string {
	quoted := make([]string, len(options))
	for i, o := range options {
		quoted[i] = strconv.Quote(o)
	}
	return fmt.Sprintf(`root = if ![%s].contains(this) { [ "field %s: %%v is not one of %s".format(this) ] }`,
		strings.Join(quoted, ", "), field, strings.Join(options, ", "))
}

// fieldLint is the lint rule of a field whose form run checks with a
// function of its own (fieldChecks): that function.
func fieldLint(field string) string {
	if _, ok := fieldChecks[field]; !ok {
		panic("no check of field " + field)
	}
	return fmt.Sprintf(`root = this.%s(%q)`, fieldCheckMethod, field)
}

// durationAtLeast is the lint rule of a duration field that must be at
// least minMS milliseconds (Benthos' lint has no duration parser before the
// pure components load, so the common forms are read here: a number and one
// unit; anything else is left to the input's own check at start).
func durationAtLeast(field string, minMS float64, expected string) string {
	return fmt.Sprintf(`let v = this.string()
let ms = match {
  $v.has_prefix("-") => -1,
  $v.re_match("^[0-9.]+ms$") => $v.trim_suffix("ms").number(),
  $v.re_match("^[0-9.]+(us|µs)$") => $v.trim_suffix("us").trim_suffix("µs").number() / 1000,
  $v.re_match("^[0-9.]+ns$") => $v.trim_suffix("ns").number() / 1000000,
  $v.re_match("^[0-9.]+s$") => $v.trim_suffix("s").number() * 1000,
  $v.re_match("^[0-9.]+m$") => $v.trim_suffix("m").number() * 60000,
  $v.re_match("^[0-9.]+h$") => $v.trim_suffix("h").number() * 3600000,
  $v == "0" => 0,
  _ => 1000000000000,
}.catch(1000000000000)
root = if $ms < %s { [ "field %s: %%v is too short; expected at least %s".format($v) ] }`, strconv.FormatFloat(minMS, 'f', -1, 64), field, expected)
}
