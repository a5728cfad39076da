package input

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
	"github.com/benthos-kinesis/benthos-kinesis/input/leasecoord"
	"github.com/benthos-kinesis/benthos-kinesis/input/read"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
)

// coordinationConfig is the parsed checkpoint configuration: the local
// store's (fileConfig) or the lease table's (leaseConfig).
type coordinationConfig interface {
	// check refuses at start what can never serve (an unusable directory,
	// a missing table), rather than Connect retrying it for ever.
	check(conf config) error
	// open opens the store or the table; cfg is the input's AWS
	// configuration, opts those of the table's client.
	open(ctx context.Context, conf config, cfg aws.Config, log *service.Logger, opts ...awsclient.Option) (coord.Coordination, error)
	// store names where the checkpoints are kept, for messages (the
	// directory's absolute path, or the table), and the flags that point the
	// checkpoint commands at it.
	store() (where, flags string)
}

// fileConfig is checkpoint.dir: one instance, its checkpoints in a file.
type fileConfig struct{ Dir string }

func (f fileConfig) check(conf config) error {
	// A directory that can never serve stops the binary at start with its
	// message, rather than Connect retrying it for ever.
	if err := checkpoint.CheckDir(f.Dir); err != nil {
		return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	var streams []string
	for _, ref := range conf.Streams {
		streams = append(streams, ref.String())
	}
	if err := checkpoint.CheckLocks(f.Dir, streams); err != nil {
		return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	if err := checkpoint.CheckFiles(f.Dir, streams); err != nil {
		return fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	return nil
}

func (f fileConfig) open(_ context.Context, _ config, _ aws.Config, log *service.Logger, _ ...awsclient.Option) (coord.Coordination, error) {
	store, err := checkpoint.OpenFile(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("field %s.%s: %w", fCheckpoint, fCheckpointDir, err)
	}
	where, _ := f.store()
	log.Infof("checkpoints are kept in the %s", where)
	return coord.NewLocal(store), nil
}

// store names the directory by its absolute path: a relative one (the
// default) depends on the working directory, and a start from another one
// finds an empty store.
func (f fileConfig) store() (where, flags string) {
	dir := f.Dir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return "directory " + dir, checkpoint.DirFlags(dir)
}

// store names the table and its group, and the flags that point the
// checkpoint command at it: every setting of the table's that is not the
// input's (the stream's flags say those).
func (l *leaseConfig) store() (where, flags string) {
	where = "lease table " + l.Table
	if l.Group != "" {
		where += " group " + l.Group
	}
	flags = checkpoint.TableFlags(l.Table, l.Group) + checkpoint.Flags(
		"--dynamodb-endpoint", l.Endpoint, "--dynamodb-region", l.Region,
		"--dynamodb-profile", l.Creds.Profile, "--dynamodb-role", l.Creds.Role, "--dynamodb-role-external-id", l.Creds.RoleExternalID)
	if l.CredsFromChain {
		flags += " --dynamodb-credentials-from-stream=false"
	}
	return where, flags
}

// check stops the binary at start when the lease table cannot serve
// whatever happens next (access denied, missing with create off, another
// kind of table), rather than Connect retrying it for ever. What it cannot
// tell within a few seconds is left to Connect.
func (l *leaseConfig) check(conf config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cfg, err := awsclient.Load(ctx, l.settings(conf))
	if err != nil {
		return nil // Connect says why, and retries
	}
	if err := lease.Check(ctx, l.client(cfg), l.Table, l.Create); err != nil {
		return fmt.Errorf("field %s.%s.%s: %w", fCheckpoint, fDynamo, fDynamoTable, err)
	}
	return nil
}

// settings are what reaching the table takes: the input's, with the
// table's region, and the table's credentials over the input's: its
// profile or static keys replace the input's profile and static keys, its
// role the input's role (CredsFromChain: the SDK's chain instead of the
// input's).
func (l *leaseConfig) settings(conf config) awsclient.Settings {
	return conf.settings().Over(l.Creds.in(awsclient.Settings{Region: l.Region}), l.CredsFromChain)
}

// ownCredentials reports whether the table's calls are not signed as the
// input's.
func (l *leaseConfig) ownCredentials() bool {
	return l.CredsFromChain || l.Creds != (credentials{})
}

func (l *leaseConfig) open(ctx context.Context, conf config, cfg aws.Config, log *service.Logger, opts ...awsclient.Option) (coord.Coordination, error) {
	if l.Region != "" || l.ownCredentials() {
		var err error
		if cfg, err = awsclient.Load(ctx, l.settings(conf)); err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", fCheckpoint, fDynamo, err)
		}
	}
	t, err := lease.Open(ctx, l.client(cfg, opts...), l.Table, l.Create)
	if err != nil {
		return nil, fmt.Errorf("field %s.%s.%s: %w", fCheckpoint, fDynamo, fDynamoTable, err)
	}
	as := ""
	switch s := l.settings(conf); {
	case s.Role != "":
		as = ", as role " + s.Role
	case l.ownCredentials():
		as = ", with its own credentials"
	}
	where, tableFlags := l.store()
	digest := currentDigest()
	switch {
	case digest == nil:
		log.Infof("the instances of %s do not compare their pipeline configs: this binary does not publish them (a Benthos binary of your own adds input.CLIOpt())", where)
	case digest["input"] == "":
		log.Infof("the instances of %s do not compare their pipeline configs: the main config holds no input (streams mode)", where)
		digest = nil
	}
	log.Infof("checkpoints are kept in the %s (region %s%s), sharing shards as instance %s (lease_period %v)", where, cfg.Region, as, l.InstanceID, l.LeasePeriod)
	return leasecoord.New(lease.Grouped(t, l.Group), leasecoord.Options{
		InstanceID: l.InstanceID, LeasePeriod: l.LeasePeriod, StealLimit: l.StealLimit, ByLoad: l.Balance == balanceThroughput,
		Group: l.Group, Config: digest, TableFlags: tableFlags,
	}), nil
}

// client is the lease table's DynamoDB client. Each of its calls is bounded
// by the lease period too (when shorter than DynamoDBCallTimeout): an answer
// later than that is of no use to the lease it was about, which another
// instance may hold by then, and the next lease cycle asks again. Writes of
// held leases are bounded further, by a third of it (leasecoord). Never
// below minLeaseCallTimeout: a short lease_period must not turn a slow but
// answering table (a throttled call the SDK retries) into one that never
// answers.
const minLeaseCallTimeout = 5 * time.Second

func (l *leaseConfig) client(cfg aws.Config, opts ...awsclient.Option) *dynamodb.Client {
	timeout := awsclient.CallTimeout(min(awsclient.DynamoDBCallTimeout, max(l.LeasePeriod, minLeaseCallTimeout)))
	return awsclient.DynamoDB(cfg, l.Endpoint, append([]awsclient.Option{timeout}, opts...)...)
}

// readStore tells the readers where positions are kept, and words the
// command that sets a shard's.
func readStore(conf config) read.Store {
	where, flags := conf.Coordination.store()
	l, lease := conf.Coordination.(*leaseConfig)
	st := read.Store{
		Where:       where,
		StreamFlags: conf.commandFlags,
		SetCommand: func(streamARN, shardID string) string {
			return checkpoint.SetCommand(flags, conf.commandFlags(streamARN), shardID, lease)
		},
	}
	if lease && l.Group != "" {
		st.EmptyHint = fmt.Sprintf("a group reads from its own checkpoints only, not those of another group or of no group (`benthos-kinesis checkpoint show --table %s [--group G]` lists them, `checkpoint set` moves a shard)", checkpoint.ShellQuote(l.Table))
	}
	return st
}
