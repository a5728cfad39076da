package input

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/efo"
	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// config is the parsed and validated configuration of the input.
type config struct {
	Streams  []streamRef
	Region   string
	Endpoint string
	TLS      *tls.Config // nil: the SDK's default transport
	Creds    credentials

	Reader         *readerKind
	EFO            efoConfig
	StartFrom      string
	StartTimestamp time.Time

	PollingInterval time.Duration
	PollingIdle     time.Duration
	PollingLimit    int32

	CheckpointLimit int
	// MemoryLimit bounds the bytes of records in flight across every shard
	// (see memory_limit); 0: no limit.
	MemoryLimit  int64
	CommitPeriod time.Duration
	// Coordination is checkpoint.dir's file (one instance), or
	// checkpoint.dynamodb's lease table (many instances share the streams).
	Coordination coordinationConfig

	Deaggregate       bool
	DiscoveryInterval time.Duration
	Batching          service.BatchPolicy
	ReplayNacks       bool
	StrictOrder       bool
}

type leaseConfig struct {
	Table       string
	Create      bool
	Endpoint    string
	LeasePeriod time.Duration
	InstanceID  string
	StealLimit  int
	Balance     string // balanceThroughput or balanceCount
	// Group is the group of pipelines sharing the table (lease.Grouped);
	// empty: the table is the group.
	Group string
	// Region and Creds are the table's when it is not in the stream's
	// region or account: empty means the input's. Fields of Creds set
	// replace the input's (see settings); with CredsFromChain the input's
	// are not used at all.
	Region         string
	Creds          credentials
	CredsFromChain bool
}

// The ways instances share a stream's shards (checkpoint.dynamodb.balance).
const (
	balanceThroughput = "throughput"
	balanceCount      = "count"
)

type efoConfig struct {
	ConsumerName      string
	Registration      string
	ConsumerARNs      map[string]efo.ConsumerARN // by stream name
	DeregisterOnClose bool
}

type credentials struct {
	Profile, ID, Secret, Token, Role, RoleExternalID string
}

// streamRef is a stream as the user named it: by name, or by ARN.
type streamRef = awsclient.StreamRef

// maxCheckpointLimit bounds checkpoint.limit. The ack tracker counts records
// in ints, and the warning about records read past the checkpoint comes
// first at read.BehindWarnFactor times the limit (then at each doubling of the
// count): within this bound none of them can overflow, and no shard holds
// anywhere near as many records in memory.
const maxCheckpointLimit = 1<<31 - 1

// fieldError names the field, the value and what was expected.
func fieldError(field string, value any, expected string, args ...any) error {
	return fmt.Errorf("field %s: %q: %s", field, fmt.Sprint(value), fmt.Sprintf(expected, args...))
}

// parseStreamRef accepts a stream name or a stream ARN.
func parseStreamRef(s string) (streamRef, string, error) {
	ref, region, err := awsclient.ParseStreamRef(s)
	if err != nil {
		return ref, region, fmt.Errorf("field %s: %w", fStreams, err)
	}
	return ref, region, nil
}

// settings are what reaching AWS takes, from the region, endpoint, tls and
// credentials fields.
func (c config) settings() awsclient.Settings {
	return c.Creds.in(awsclient.Settings{Region: c.Region, Endpoint: c.Endpoint, TLS: c.TLS})
}

// in returns s with these credentials.
func (c credentials) in(s awsclient.Settings) awsclient.Settings {
	s.Profile, s.ID, s.Secret, s.Token, s.Role, s.RoleExternalID = c.Profile, c.ID, c.Secret, c.Token, c.Role, c.RoleExternalID
	return s
}

// commandFlags point the checkpoint command at a stream (by its ARN, which
// names its account and region) as the input reaches it: its endpoint,
// profile and role. Static keys are the environment's.
func (c config) commandFlags(streamARN string) string {
	return checkpoint.StreamFlags(streamARN, "--endpoint", c.Endpoint, "--profile", c.Creds.Profile,
		"--role", c.Creds.Role, "--role-external-id", c.Creds.RoleExternalID)
}

func parseConfig(pc *service.ParsedConfig) (config, error) {
	var c config
	var err error
	if err := checkMoved(pc); err != nil {
		return c, err
	}
	rawStreams, err := pc.FieldStringList(fStreams)
	if err != nil {
		return c, err
	}
	if len(rawStreams) == 0 {
		return c, fmt.Errorf("field %s: at least one stream name or ARN is required", fStreams)
	}
	if c.Region, err = pc.FieldString(fRegion); err != nil {
		return c, err
	}
	seen := map[string]bool{}
	arnRegion := ""
	for _, raw := range rawStreams {
		ref, region, err := parseStreamRef(strings.TrimSpace(raw))
		if err != nil {
			return c, err
		}
		if seen[ref.Name] {
			return c, fieldError(fStreams, raw, "stream %s is listed twice", ref.Name)
		}
		seen[ref.Name] = true
		if region != "" {
			if c.Region != "" && region != c.Region {
				return c, fieldError(fStreams, raw, "the ARN is in region %s but region is %s; one input reads one region", region, c.Region)
			}
			if arnRegion != "" && region != arnRegion {
				return c, fieldError(fStreams, raw, "the ARN is in region %s but another stream is in %s; one input reads one region", region, arnRegion)
			}
			arnRegion = region
		}
		c.Streams = append(c.Streams, ref)
	}
	if c.Region == "" {
		c.Region = arnRegion
	}
	if err := fieldChecks[fRegion](c.Region); err != nil {
		return c, err
	}

	if c.Endpoint, err = pc.FieldString(fEndpoint); err != nil {
		return c, err
	}
	if err := fieldChecks[fEndpoint](c.Endpoint); err != nil {
		return c, err
	}
	if tlsConf, enabled, err := pc.FieldTLSToggled(fTLS); err != nil {
		return c, fmt.Errorf("field %s: %w", fTLS, err)
	} else if enabled {
		c.TLS = tlsConf
	}
	if c.Creds, err = parseCredentials(pc.Namespace(fCredentials), fCredentials); err != nil {
		return c, err
	}

	name, err := pc.FieldString(fReader)
	if err != nil {
		return c, err
	}
	if c.Reader = readerNamed(name); c.Reader == nil {
		return c, fieldError(fReader, name, "unknown reader; expected %s", strings.Join(readerNames(), " or "))
	}
	if err := c.Reader.parse(pc, &c); err != nil {
		return c, err
	}

	if c.StartFrom, err = pc.FieldString(fStartFrom); err != nil {
		return c, err
	}
	ts, err := pc.FieldString(fStartTimestamp)
	if err != nil {
		return c, err
	}
	switch c.StartFrom {
	case startLatest, startTrimHorizon:
		if ts != "" {
			return c, fieldError(fStartTimestamp, ts, "is set but start_from is %s; set start_from: at_timestamp to use it", c.StartFrom)
		}
	case startAtTimestamp:
		if ts == "" {
			return c, fmt.Errorf("field %s: start_from at_timestamp needs an RFC 3339 start_timestamp, e.g. 2024-05-01T00:00:00Z", fStartTimestamp)
		}
		if c.StartTimestamp, err = parseStartTimestamp(ts, time.Now()); err != nil {
			return c, err
		}
	default:
		return c, fieldError(fStartFrom, c.StartFrom, "unknown start; expected latest, trim_horizon or at_timestamp")
	}

	pol := pc.Namespace(fPolling)
	if c.PollingInterval, err = pol.FieldDuration(fPollingInterval); err != nil {
		return c, err
	}
	if c.PollingInterval < polling.MinInterval {
		return c, fieldError(fPolling+"."+fPollingInterval, c.PollingInterval, "must be at least %v: Kinesis allows 5 GetRecords calls per second per shard", polling.MinInterval)
	}
	if c.PollingIdle, err = pol.FieldDuration(fPollingIdleInterval); err != nil {
		return c, err
	}
	// Below interval (a longer interval than the default idle_interval, say)
	// it never backs off: an idle shard is read as often as a busy one.
	c.PollingIdle = max(c.PollingIdle, c.PollingInterval)
	limit, err := pol.FieldInt(fPollingLimit)
	if err != nil {
		return c, err
	}
	if limit < 1 || limit > 10000 {
		return c, fieldError(fPolling+"."+fPollingLimit, limit, "expected 1 to 10000 records per GetRecords call")
	}
	c.PollingLimit = int32(limit)

	cp := pc.Namespace(fCheckpoint)
	dir, err := cp.FieldString(fCheckpointDir)
	if err != nil {
		return c, err
	}
	if cp.Contains(fDynamo) {
		if dir != "" {
			return c, fieldError(fCheckpoint+"."+fCheckpointDir, dir, "is set together with %s.%s; with a lease table the checkpoints live in the table, so remove dir", fCheckpoint, fDynamo)
		}
		if c.Coordination, err = parseLeaseConfig(cp.Namespace(fDynamo)); err != nil {
			return c, err
		}
	} else {
		if dir == "" {
			dir = defaultCheckpointDir
		}
		c.Coordination = fileConfig{Dir: dir}
	}
	if c.CheckpointLimit, err = cp.FieldInt(fCheckpointLimit); err != nil {
		return c, err
	}
	if c.CheckpointLimit < 1 || c.CheckpointLimit > maxCheckpointLimit {
		return c, fieldError(fCheckpoint+"."+fCheckpointLimit, c.CheckpointLimit, "expected 1 to %d unacknowledged records per shard", maxCheckpointLimit)
	}
	if c.CommitPeriod, err = cp.FieldDuration(fCheckpointCommitPeriod); err != nil {
		return c, err
	}
	if c.CommitPeriod <= 0 {
		return c, fieldError(fCheckpoint+"."+fCheckpointCommitPeriod, c.CommitPeriod, "expected a positive duration, e.g. 1s")
	}

	if c.ReplayNacks, err = pc.FieldBool(service.AutoRetryNacksToggleFieldName); err != nil {
		return c, err
	}
	if c.StrictOrder, err = pc.FieldBool(fStrictOrder); err != nil {
		return c, err
	}
	if c.Deaggregate, err = pc.FieldBool(fDeaggregate); err != nil {
		return c, err
	}
	ml, err := pc.FieldString(fMemoryLimit)
	if err != nil {
		return c, err
	}
	if c.MemoryLimit, err = parseBytes(ml); err != nil {
		return c, fieldError(fMemoryLimit, ml, "%v", err)
	}
	if c.DiscoveryInterval, err = pc.FieldDuration(fShardDiscoveryInterval); err != nil {
		return c, err
	}
	if c.DiscoveryInterval < time.Second {
		return c, fieldError(fShardDiscoveryInterval, c.DiscoveryInterval, "expected at least 1s")
	}
	if c.Batching, err = pc.FieldBatchPolicy(fBatching); err != nil {
		return c, err
	}
	// Checked here, not first when the batcher is made as the input
	// connects: a period that is not a duration would log one error
	// naming no field and read nothing.
	if p := c.Batching.Period; p != "" {
		if d, err := time.ParseDuration(p); err != nil || d < 0 {
			return c, fieldError(fBatching+".period", p, "expected a duration, e.g. 1s")
		}
	}
	if ch := c.Batching.Check; ch != "" {
		if _, err := bloblang.Parse(ch); err != nil {
			return c, fieldError(fBatching+".check", ch, "not a Bloblang query: %v", err)
		}
	}
	return c, nil
}

// parseCredentials reads the credentials object at field.
func parseCredentials(pc *service.ParsedConfig, field string) (credentials, error) {
	var c credentials
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{fCredProfile, &c.Profile}, {fCredID, &c.ID}, {fCredSecret, &c.Secret}, {fCredToken, &c.Token},
		{fCredRole, &c.Role}, {fCredRoleExternalID, &c.RoleExternalID},
	} {
		v, err := pc.FieldString(f.name)
		if err != nil {
			return c, err
		}
		*f.dst = v
	}
	if (c.ID == "") != (c.Secret == "") {
		return c, fmt.Errorf("field %s: %s and %s go together: set both or neither", field, fCredID, fCredSecret)
	}
	if c.Token != "" && c.ID == "" {
		return c, fmt.Errorf("field %s.%s: a session token needs %s and %s", field, fCredToken, fCredID, fCredSecret)
	}
	if c.Profile != "" && c.ID != "" {
		return c, fmt.Errorf("field %s: set either %s or static %s/%s, not both", field, fCredProfile, fCredID, fCredSecret)
	}
	if c.RoleExternalID != "" && c.Role == "" {
		return c, fmt.Errorf("field %s.%s: an external id needs %s", field, fCredRoleExternalID, fCredRole)
	}
	if c.Role != "" && !strings.HasPrefix(c.Role, "arn:") {
		return c, fieldError(field+"."+fCredRole, c.Role, "expected a role ARN, e.g. arn:aws:iam::123456789012:role/reader")
	}
	return c, nil
}

func parseEFO(pc *service.ParsedConfig, streams []streamRef) (efoConfig, error) {
	var c efoConfig
	var err error
	const ns = fEFO + "."
	if c.ConsumerName, err = pc.FieldString(fEFOConsumerName); err != nil {
		return c, err
	}
	if c.Registration, err = pc.FieldString(fEFORegistration); err != nil {
		return c, err
	}
	if c.DeregisterOnClose, err = pc.FieldBool(fEFODeregisterOnClose); err != nil {
		return c, err
	}
	arns, err := pc.FieldStringMap(fEFOConsumerARNs)
	if err != nil {
		return c, err
	}
	if c.ConsumerName != "" {
		if err := efo.CheckConsumerName(c.ConsumerName); err != nil {
			return c, fmt.Errorf("field %s%s: %w", ns, fEFOConsumerName, err)
		}
	}
	switch c.Registration {
	case registrationLazy, registrationEager:
		if c.ConsumerName == "" {
			return c, fmt.Errorf("field %s%s: reader efo with registration %s needs a consumer name, e.g. my-app", ns, fEFOConsumerName, c.Registration)
		}
		if len(arns) > 0 {
			return c, fmt.Errorf("field %s%s: consumer ARNs are only used with registration none, not %s", ns, fEFOConsumerARNs, c.Registration)
		}
	case registrationNone:
		if c.ConsumerName != "" {
			return c, fieldError(ns+fEFOConsumerName, c.ConsumerName, "not used with registration none (the ARNs in consumer_arns name the consumer); remove it")
		}
		if c.ConsumerARNs, err = parseConsumerARNs(arns, streams); err != nil {
			return c, err
		}
	default:
		return c, fieldError(ns+fEFORegistration, c.Registration, "unknown registration; expected lazy, eager or none")
	}
	if c.DeregisterOnClose && c.Registration != registrationLazy {
		return c, fmt.Errorf("field %s%s: only with registration lazy; with %s the consumer is managed outside the input", ns, fEFODeregisterOnClose, c.Registration)
	}
	return c, nil
}

// checkUnusedEFO checks the efo fields of a polling reader: each a value
// the efo reader would take, though none is used.
func checkUnusedEFO(pc *service.ParsedConfig) error {
	const ns = fEFO + "."
	name, err := pc.FieldString(fEFOConsumerName)
	if err != nil {
		return err
	}
	if name != "" {
		if err := efo.CheckConsumerName(name); err != nil {
			return fmt.Errorf("field %s%s: %w", ns, fEFOConsumerName, err)
		}
	}
	reg, err := pc.FieldString(fEFORegistration)
	if err != nil {
		return err
	}
	switch reg {
	case registrationLazy, registrationEager, registrationNone:
		return nil
	}
	return fieldError(ns+fEFORegistration, reg, "unknown registration; expected lazy, eager or none")
}

// parseConsumerARNs checks that every stream has a consumer ARN of that very
// stream, and that no ARN is for a stream not read.
func parseConsumerARNs(arns map[string]string, streams []streamRef) (map[string]efo.ConsumerARN, error) {
	field := fEFO + "." + fEFOConsumerARNs
	out := map[string]efo.ConsumerARN{}
	used := map[string]bool{}
	for _, s := range streams {
		raw, key := arns[s.String()], s.String()
		if raw == "" && s.ARN != "" {
			raw, key = arns[s.Name], s.Name
		}
		if raw == "" {
			return nil, fmt.Errorf("field %s: no consumer ARN for stream %s: with registration none every stream needs one", field, s)
		}
		used[key] = true
		c, err := efo.ParseConsumerARN(raw)
		if err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", field, key, err)
		}
		if c.Stream != s.Name || (s.ARN != "" && c.StreamARN != s.ARN) {
			return nil, fieldError(field+"."+key, raw, "is a consumer of stream %s, not of %s", c.StreamARN, s)
		}
		out[s.Name] = c
	}
	for key := range arns {
		if !used[key] {
			return nil, fieldError(field, key, "not a stream of field %s", fStreams)
		}
	}
	return out, nil
}

func parseLeaseConfig(pc *service.ParsedConfig) (*leaseConfig, error) {
	const at = fCheckpoint + "." + fDynamo + "."
	var l leaseConfig
	var err error
	if l.Table, err = pc.FieldString(fDynamoTable); err != nil {
		return nil, err
	}
	if !dynamoTableRE.MatchString(l.Table) {
		return nil, fieldError(at+fDynamoTable, l.Table, "expected a DynamoDB table name: 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.'")
	}
	if l.Create, err = pc.FieldBool(fDynamoCreate); err != nil {
		return nil, err
	}
	if l.Endpoint, err = pc.FieldString(fDynamoEndpoint); err != nil {
		return nil, err
	}
	if err := fieldChecks[at+fDynamoEndpoint](l.Endpoint); err != nil {
		return nil, err
	}
	if l.LeasePeriod, err = pc.FieldDuration(fDynamoLeasePeriod); err != nil {
		return nil, err
	}
	if l.LeasePeriod < time.Second {
		return nil, fieldError(at+fDynamoLeasePeriod, l.LeasePeriod, "expected at least 1s")
	}
	if l.InstanceID, err = pc.FieldString(fDynamoInstanceID); err != nil {
		return nil, err
	}
	if len(l.InstanceID) > maxInstanceID {
		return nil, fieldError(at+fDynamoInstanceID, l.InstanceID[:40]+"...", "is %d bytes long; expected at most %d (it is part of a DynamoDB key, which holds at most 2048 bytes with the stream's ARN)", len(l.InstanceID), maxInstanceID)
	}
	if l.InstanceID == "" {
		l.InstanceID = newInstanceID()
	}
	if l.StealLimit, err = pc.FieldInt(fDynamoStealLimit); err != nil {
		return nil, err
	}
	if l.StealLimit < 0 {
		return nil, fieldError(at+fDynamoStealLimit, l.StealLimit, "expected 0 (never ask for leases) or more")
	}
	if l.Balance, err = pc.FieldString(fDynamoBalance); err != nil {
		return nil, err
	}
	if l.Balance != balanceThroughput && l.Balance != balanceCount {
		return nil, fieldError(at+fDynamoBalance, l.Balance, "expected throughput or count")
	}
	if l.Group, err = pc.FieldString(fDynamoGroup); err != nil {
		return nil, err
	}
	if err := lease.CheckGroup(l.Group); err != nil && l.Group != "" {
		return nil, fieldError(at+fDynamoGroup, l.Group, "%v", err)
	}
	if l.Region, err = pc.FieldString(fDynamoRegion); err != nil {
		return nil, err
	}
	if err := fieldChecks[at+fDynamoRegion](l.Region); err != nil {
		return nil, err
	}
	if l.Creds, err = parseCredentials(pc.Namespace(fCredentials), at+fCredentials); err != nil {
		return nil, err
	}
	fromInput, err := pc.FieldBool(fCredentials, fCredFromInput)
	if err != nil {
		return nil, err
	}
	l.CredsFromChain = !fromInput
	return &l, nil
}

// maxInstanceID bounds instance_id in bytes: the key of an instance's item
// is the stream's ARN (at most about 200 bytes), ":worker:" and the id, and
// DynamoDB refuses a key over 2048 bytes.
const maxInstanceID = 1024

// dynamoTableRE is what DynamoDB accepts as a table name.
var dynamoTableRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// newInstanceID names this process in a lease table: the host and a random
// suffix, so that a restart is a new instance.
func newInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "instance"
	}
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%x", host, b)
}

// parseStartTimestamp reads start_timestamp (see checkpoint.ParseTime). The
// time is pinned when the shards are first seen, so a restart does not move
// it.
func parseStartTimestamp(ts string, now time.Time) (time.Time, error) {
	t, err := checkpoint.ParseTime(ts, now)
	if err != nil {
		return time.Time{}, fieldError(fStartTimestamp, ts, "%s", err)
	}
	return t, nil
}

// defaultMemoryLimit is memory_limit's default: a few shards read at full
// speed within it, and an instance reading hundreds of shards stays within
// 128 MiB of resident memory (see cmd/kinesis-bench/BENCHMARKS.md).
const defaultMemoryLimit = "64MiB"

// byteUnits are the units memory_limit takes.
var byteUnits = []struct {
	suffix string
	n      int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// parseBytes reads a size: bytes, or a number with a unit of byteUnits.
// bytesExpected says what memory_limit takes, for its lint rule and its
// parse error.
const bytesExpected = "expected a size in bytes, or a whole number with a unit (KiB, MiB, GiB, KB, MB, GB), such as 64MiB; 0 for no limit"

func parseBytes(s string) (int64, error) {
	num, unit := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(v), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, errors.New(bytesExpected)
	}
	return n * unit, nil
}
