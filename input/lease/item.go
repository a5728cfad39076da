package lease

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
)

// Attribute names. Where the meaning is the same as in a KCL lease table the
// name is KCL's, so that people who know KCL can read the table.
const (
	attrKey          = "leaseKey"     // the hash key
	attrOwner        = "leaseOwner"   // the instance holding the lease; absent when free
	attrCounter      = "leaseCounter" // moved by every write of the holder
	attrCheckpoint   = "checkpoint"   // last acknowledged sequence number, or SHARD_END
	attrSubSequence  = "checkpointSubSequenceNumber"
	attrParents      = "parentShardId" // string set
	attrKind         = "kind"          // shard, stream or worker
	attrStream       = "streamArn"
	attrShard        = "shardId"
	attrPartial      = "checkpointPartial" // the checkpoint sits inside an aggregate
	attrStartKind    = "startKind"         // where the shard is read from before any checkpoint
	attrStartTime    = "startTimestamp"
	attrShardStart   = "startingSequenceNumber" // the shard's first sequence number
	attrHandoffTo    = "handoffTo"              // an instance asking the holder for the lease
	attrOwnerNonce   = "leaseOwnerNonce"        // the nonce of the process holding the lease (Worker.Nonce)
	attrHandoffNonce = "handoffNonce"           // the nonce of the process asking for it
	attrCreated      = "streamCreated"          // stream and shard items: the stream's creation time
	attrPinned       = "pinned"                 // stream items: the first shards' starts are stored
	attrWriteID      = "lastWriteId"            // a random id of the holder's last write
	attrNonce        = "workerNonce"            // worker items: a random id of the process
	attrLoads        = "shardLoads"             // worker items: bytes/s read of each shard held
	attrConfig       = "pipelineConfig"         // worker items: a digest of each part of the pipeline's config
	attrHeld         = "leasesHeld"             // worker items: the shards whose leases the heartbeat renews
	attrBorn         = "workerBorn"             // worker items: a random id of the heartbeat that wrote the item anew
	attrRosterBeats  = "beatsInRoster"          // worker items: the instance beats in the stream's roster (see roster.go)
	attrProfile      = "profile"                // worker items: the number its beats name it by (Beat.Profile)
	attrHandedOver   = "handedOver"             // shard items: handed over by its last holder, not taken up yet
	attrTakenAt      = "takenAt"                // shard items: the counter the last take set (a grant's identity)
	attrChanges      = "leaseChanges"           // stream items: moved by every change of a lease's owner (see Announce)
	attrRosters      = "rosters"                // stream items: how many roster items the stream's instances beat in
	attrLog          = "leaseLog"               // stream items: the shard of each of the last changes, by counter (see announce)
	attrBeats        = "beats"                  // roster items: each instance's beat, by instance id
	kindShard        = "shard"
	kindStream       = "stream"
	kindWorker       = "worker"
	kindRegistration = "registration"
	kindRoster       = "roster"
	shardEnd         = "SHARD_END"
	timestampEncoder = time.RFC3339Nano
)

// Shard is the item of one shard.
type Shard struct {
	Stream  string // the stream's ARN
	ShardID string
	// Owner is the instance holding the lease, empty when free.
	Owner string
	// OwnerNonce is the nonce of the process that holds it (Worker.Nonce):
	// a process started later under Owner's name does not hold it. Empty
	// when free, or written by a version that did not write it.
	OwnerNonce string
	// Counter moves with every write of the holder and every change of
	// owner: a write conditional on it fails once anyone else wrote.
	Counter int64
	// Checkpoint holds the start, the acknowledged position and the end.
	Checkpoint checkpoint.Checkpoint
	Parents    []string
	// HandoffTo is an instance that asked the holder for the lease, and
	// HandoffNonce the nonce of its process (empty when not written).
	HandoffTo    string
	HandoffNonce string
	// HandedOver is set by a handover and cleared by the take that takes
	// the lease up: until then, its new owner's beats do not renew it
	// (it holds it by its item alone).
	HandedOver bool
	// LastWrite is the id of the holder's last write (Write.ID); a take
	// clears it. So a counter that moved with no LastWrite was moved by a
	// take, and one with a LastWrite by the holder's own writes
	// (checkpoints), which change no owner.
	LastWrite string
	// TakenAt is the counter the lease's last take set (0: no take since
	// versions that record it): with the owner and its process, it names
	// the grant, which checkpoints do not change. (A lease taken back by
	// its owner's process after another took it shows the same owner, a
	// higher counter and a LastWrite of the owner's: only TakenAt tells the
	// grants apart.)
	TakenAt int64
	// Created is the creation time of the stream the shard belongs to, as
	// the instance that created or replaced the item knew it; zero when it
	// did not (registration none describes no stream) or when an older
	// version wrote the item. Replace never puts an item of an earlier
	// stream over one of a later.
	Created time.Time
}

// Key returns the item's leaseKey.
func (s Shard) Key() string { return ShardKey(s.Stream, s.ShardID) }

// ShardKey is the leaseKey of a shard: the stream's ARN and the shard id.
func ShardKey(streamARN, shardID string) string { return streamARN + ":" + shardID }

func streamKey(streamARN string) string { return streamARN }

func workerKey(streamARN, instance string) string {
	return streamARN + ":worker:" + instance
}

func registrationKey(streamARN, consumer string) string {
	return streamARN + ":registration:" + consumer
}

// Stream is the item of one stream: what all instances must agree on before
// any shard is read.
type Stream struct {
	ARN string
	// Created is the stream's creation time (zero when unknown).
	Created time.Time
	// Start is where the shards listed at the first start are read from
	// (start_from, latest stored as the time it meant).
	Start checkpoint.Start
	// Pinned is set once the first shards' items hold Start.
	Pinned bool
	// Changes moves with every change of the owner of one of the stream's
	// leases (a take, an ask, a handover, a release, an item created,
	// deleted or set): an instance scans the stream's items again only when
	// it moved (see Store.Poll). Checkpoints do not move it.
	Changes int64
	// Log names the shard of each of the last changes, by the counter it
	// moved Changes to (see ChangedSince).
	Log map[int64]string
	// Rosters is how many roster items the stream's instances beat in.
	Rosters int
	// Malformed says why the item in the table could not be read (a hand
	// edit: a streamCreated or startTimestamp that is no time), the other
	// fields then zero: its reader replaces it, as that of a stream
	// created again.
	Malformed string
}

// Worker is the presence of one instance on a stream: its counter moves
// while it lives.
type Worker struct {
	ID      string
	Counter int64
	// Nonce is a random id of the process that last wrote the item: two
	// processes started with one instance id write two nonces. Empty on an
	// item written before nonces were.
	Nonce string
	// Born is a random id of the heartbeat that wrote the item anew (see
	// Presence.Born): an item removed as dead and written again by its
	// process is another item, whatever its counter. Empty on an item
	// written before it was kept.
	Born string
	// Loads is the measured load, in bytes a second written to the shard,
	// of each shard the instance held at its last heartbeat: what
	// balancing by load weighs.
	Loads map[string]float64
	// Config is a digest of each part of the instance's pipeline config
	// (see Presence.Config); empty when it published none.
	Config map[string]string
	// Held is the set of shards whose leases the instance's last heartbeat
	// renewed, when Listed: a lease of it that is not listed is renewed by
	// its own item only (handed to the instance and not taken up yet, or
	// held by another process of its name). Not Listed: written by a
	// version that did not list them, whose heartbeat renews every lease
	// the instance owns.
	Held   map[string]bool
	Listed bool
	// Roster is set on the item of an instance that beats in the stream's
	// roster (see Beat), whose counter moves only with what it publishes
	// (Presence); unset, the instance is of a version that beat by moving
	// this item's counter, and Held says what its beats renew.
	Roster bool
	// Profile is the number of this writing of the item (Presence.Profile).
	Profile int64
	// Bucket is the roster item the instance beats in, when the worker
	// is its beat as polled (not set on a worker item as read).
	Bucket int
}

// Presence is what an instance's heartbeat publishes on a stream.
type Presence struct {
	// Nonce is a random id of the process (see Worker.Nonce).
	Nonce string
	// Loads is the measured read rate of each shard held (Worker.Loads).
	Loads map[string]float64
	// Config is a digest of each part of the pipeline's config, by part
	// (input, pipeline, output...): instances of one group that publish
	// different digests of a part run different pipelines. Nil: none is
	// published.
	Config map[string]string
	// Held lists the shards whose leases this heartbeat renews (Worker.Held):
	// those the instance holds, by its own account, as it sends it.
	Held []string
	// Beat is the number of heartbeats the process sent before this one:
	// a worker item written anew starts its counter past every value an
	// item of the process had (see counterBase).
	Beat int64
	// Roster marks the item as one of an instance that beats in the
	// stream's roster (Worker.Roster), and Profile is the number its beats
	// name this writing of it by (Beat.Profile).
	Roster  bool
	Profile int64
	// Born is a random id of this heartbeat (NewWriteID), kept as the
	// item's Worker.Born if it writes the item anew. Counters alone do not
	// tell items apart: a heartbeat held up on its way, or applied twice
	// by a retry, can write an item anew at a counter its removed
	// predecessor had, and a removal conditional on that counter alone
	// would delete the live item (sim seed 58075).
	Born string
}

// counterBase is where the counter of a worker item written by the
// heartbeat p starts: past every value an earlier item of the process had
// (it moved by one a heartbeat), and elsewhere for another process (by its
// nonce). So the counter of an item removed as dead and written again
// never repeats, and an observer that remembers the old value never takes
// the new item for one that did not move.
func counterBase(p Presence) int64 {
	h := fnv.New64a()
	h.Write([]byte(p.Nonce))
	return int64(h.Sum64()>>16) + p.Beat // 48 bits and more: exact as a DynamoDB number and a float
}

// decodeWorker reads a worker item. A counter that is not an integer reads
// as 0: the item then just looks like an instance that did not move yet.
// Loads that are not numbers are left out: the shard then counts as not
// measured.
func decodeWorker(item map[string]types.AttributeValue) Worker {
	n, _ := getN(item, attrCounter)
	w := Worker{ID: getS(item, attrOwner), Counter: n, Nonce: getS(item, attrNonce), Born: getS(item, attrBorn),
		Roster: getBool(item, attrRosterBeats)}
	w.Profile, _ = getN(item, attrProfile)
	if l, ok := item[attrHeld].(*types.AttributeValueMemberL); ok {
		w.Listed = true
		w.Held = make(map[string]bool, len(l.Value))
		for _, v := range l.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				w.Held[sv.Value] = true
			}
		}
	}
	if m, ok := item[attrLoads].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		w.Loads = make(map[string]float64, len(m.Value))
		for id, v := range m.Value {
			if nv, ok := v.(*types.AttributeValueMemberN); ok {
				if f, err := strconv.ParseFloat(nv.Value, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
					w.Loads[id] = f
				}
			}
		}
	}
	if m, ok := item[attrConfig].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		w.Config = make(map[string]string, len(m.Value))
		for part, v := range m.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				w.Config[part] = sv.Value
			}
		}
	}
	return w
}

// encodeConfig is the config attribute of a worker item.
func encodeConfig(config map[string]string) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(config))
	for part, digest := range config {
		m[part] = str(digest)
	}
	return &types.AttributeValueMemberM{Value: m}
}

// encodeHeld is the held attribute of a worker item: a list, which unlike
// a set may be empty.
func encodeHeld(held []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(held))
	for i, id := range held {
		l[i] = str(id)
	}
	return &types.AttributeValueMemberL{Value: l}
}

// encodeLoads is the loads attribute of a worker item: whole bytes a
// second, which is all the balance needs.
func encodeLoads(loads map[string]float64) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(loads))
	for id, l := range loads {
		m[id] = &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(math.Round(max(l, 0))), 10)}
	}
	return &types.AttributeValueMemberM{Value: m}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %q is not an integer", name, v.Value)
	}
	return n, nil
}

func getBool(item map[string]types.AttributeValue, name string) bool {
	v, ok := item[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

func getTime(item map[string]types.AttributeValue, name string) (*time.Time, error) {
	s := getS(item, name)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(timestampEncoder, s)
	if err != nil {
		return nil, fmt.Errorf("attribute %s: %q is not an RFC 3339 time", name, s)
	}
	return &t, nil
}

// checkpointValues are the attributes that store a checkpoint's position
// and end: set holds those to set, remove those to remove.
func checkpointValues(cp checkpoint.Checkpoint) (set map[string]types.AttributeValue, remove []string) {
	set = map[string]types.AttributeValue{}
	switch {
	case cp.Ended:
		set[attrCheckpoint] = str(shardEnd)
		remove = append(remove, attrSubSequence, attrPartial)
	case cp.Position != nil:
		set[attrCheckpoint] = str(cp.Position.Sequence)
		set[attrSubSequence] = num(cp.Position.SubSequence)
		set[attrPartial] = &types.AttributeValueMemberBOOL{Value: cp.Position.Partial}
	}
	return set, remove
}

// encodeShard returns the whole item of s.
func encodeShard(s Shard) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:       str(s.Key()),
		attrKind:      str(kindShard),
		attrStream:    str(s.Stream),
		attrShard:     str(s.ShardID),
		attrCounter:   num(s.Counter),
		attrStartKind: str(s.Checkpoint.Start.Kind),
	}
	if s.Owner != "" {
		item[attrOwner] = str(s.Owner)
		if s.OwnerNonce != "" {
			item[attrOwnerNonce] = str(s.OwnerNonce)
		}
	}
	if ts := s.Checkpoint.Start.Timestamp; ts != nil {
		item[attrStartTime] = str(ts.UTC().Format(timestampEncoder))
	}
	if s.Checkpoint.ShardStart != "" {
		item[attrShardStart] = str(s.Checkpoint.ShardStart)
	}
	if !s.Created.IsZero() {
		item[attrCreated] = str(s.Created.UTC().Format(timestampEncoder))
	}
	var parents []string
	for _, p := range s.Parents {
		if p != "" {
			parents = append(parents, p)
		}
	}
	if len(parents) > 0 {
		item[attrParents] = &types.AttributeValueMemberSS{Value: parents}
	}
	set, _ := checkpointValues(s.Checkpoint)
	for k, v := range set {
		item[k] = v
	}
	return item
}

// decodeShard reads a shard item; an item that is not a well-formed shard
// item (checkShardItem) is an error naming the item, the attribute, its
// value and what was expected.
func decodeShard(item map[string]types.AttributeValue) (Shard, error) {
	key := getS(item, attrKey)
	if err := checkShardItem(item); err != nil {
		return Shard{}, &MalformedItemError{Key: key, Item: item, Err: err}
	}
	s, err := parseShard(item)
	if err != nil {
		return Shard{}, err
	}
	if s.Stream == "" || s.ShardID == "" {
		return Shard{}, fmt.Errorf("item %s has no %s or %s", key, attrStream, attrShard)
	}
	if _, err := s.Checkpoint.Resume(); err != nil && !s.Checkpoint.Ended {
		return Shard{}, fmt.Errorf("item %s: %w", key, err)
	}
	return s, nil
}

// parseShard reads the attributes of a shard item as they are, without
// checking that they make a shard that can be read. The result shares
// nothing with item.
func parseShard(item map[string]types.AttributeValue) (Shard, error) {
	s := Shard{
		Stream:       getS(item, attrStream),
		ShardID:      getS(item, attrShard),
		Owner:        getS(item, attrOwner),
		OwnerNonce:   getS(item, attrOwnerNonce),
		HandoffTo:    getS(item, attrHandoffTo),
		HandoffNonce: getS(item, attrHandoffNonce),
		HandedOver:   getBool(item, attrHandedOver),
		LastWrite:    getS(item, attrWriteID),
	}
	s.TakenAt, _ = getN(item, attrTakenAt)
	key := getS(item, attrKey)
	var err error
	if s.Counter, err = getN(item, attrCounter); err != nil {
		return Shard{}, fmt.Errorf("item %s: %w", key, err)
	}
	cp := &s.Checkpoint
	cp.Start.Kind = getS(item, attrStartKind)
	if cp.Start.Timestamp, err = getTime(item, attrStartTime); err != nil {
		return Shard{}, fmt.Errorf("item %s: %w", key, err)
	}
	cp.ShardStart = getS(item, attrShardStart)
	if created, err := getTime(item, attrCreated); err != nil {
		return Shard{}, fmt.Errorf("item %s: %w", key, err)
	} else if created != nil {
		s.Created = *created
	}
	switch seq := getS(item, attrCheckpoint); seq {
	case "":
	case shardEnd:
		cp.Ended = true
	default:
		sub, err := getN(item, attrSubSequence)
		if err != nil {
			return Shard{}, fmt.Errorf("item %s: %w", key, err)
		}
		cp.Position = &checkpoint.Position{Sequence: seq, SubSequence: sub, Partial: getBool(item, attrPartial)}
	}
	if ss, ok := item[attrParents].(*types.AttributeValueMemberSS); ok {
		s.Parents = append([]string(nil), ss.Value...)
	}
	return s, nil
}

func decodeStream(item map[string]types.AttributeValue) (Stream, error) {
	s := Stream{ARN: getS(item, attrStream), Pinned: getBool(item, attrPinned)}
	s.Changes, _ = getN(item, attrChanges)
	s.Log = decodeLog(item)
	rosters, _ := getN(item, attrRosters)
	s.Rosters = int(min(max(rosters, 0), maxRosters))
	key := getS(item, attrKey)
	created, err := getTime(item, attrCreated)
	if err != nil {
		return Stream{ARN: s.ARN, Malformed: fmt.Sprintf("item %s: %v", key, err)}, nil
	}
	if created != nil {
		s.Created = *created
	}
	s.Start.Kind = getS(item, attrStartKind)
	if s.Start.Timestamp, err = getTime(item, attrStartTime); err != nil {
		return Stream{ARN: s.ARN, Malformed: fmt.Sprintf("item %s: %v", key, err)}, nil
	}
	return s, nil
}

func encodeStream(s Stream) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:       str(streamKey(s.ARN)),
		attrKind:      str(kindStream),
		attrStream:    str(s.ARN),
		attrStartKind: str(s.Start.Kind),
		attrPinned:    &types.AttributeValueMemberBOOL{Value: s.Pinned},
	}
	if !s.Created.IsZero() {
		item[attrCreated] = str(s.Created.UTC().Format(timestampEncoder))
	}
	if ts := s.Start.Timestamp; ts != nil {
		item[attrStartTime] = str(ts.UTC().Format(timestampEncoder))
	}
	return item
}
