package lease

// The roster: how the instances of a stream show each other they live, for
// one small write each per beat and a read of a few items per lease cycle,
// whatever the shard count. Each instance beats in one roster item of its
// stream ("<stream>:roster:<n>"), an entry of its own in the item's beats
// map; every instance reads all of the stream's roster items, with its item,
// with a GetItem of each per cycle (Poll). A roster item is joined while it is
// small (rosterRoom), so that a beat, which DynamoDB bills by the size of
// the whole item, costs one write unit; the stream item says how many there
// are (Stream.Rosters).
//
// Roster items have no streamArn and no kind: a scan of the stream does not
// return them (versions before the roster would report them as malformed).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

// maxRosters bounds the roster items of a stream: a thousand instances and
// more, of ids of up to 30 bytes.
const maxRosters = 128

// rosterRoom is the size, in bytes as DynamoDB counts them, up to which a
// roster item takes another instance: beats in it then cost one write unit
// (a kilobyte), with room left for the entries' counters to grow.
const rosterRoom = 900

// Beat is an instance's entry in its stream's roster.
type Beat struct {
	ID string
	// Nonce is the process's (Worker.Nonce); Born a random id of the entry,
	// new each time the process writes it anew (after its removal as dead):
	// an entry removed and written again is another entry, whatever its
	// counter.
	Nonce, Born string
	// Counter moves with every beat of the process, and never back: a beat
	// held up on its way that lands after a later one is refused.
	Counter int64
	// Profile moves each time the process publishes its Presence (the
	// worker item): the others read that item again when it moved.
	Profile int64
	// Bucket is the roster item the entry is in.
	Bucket int
	// Replacing, for a beat that takes over (Store.Beat's takeOver), is
	// the entry of another process of the instance's name that it
	// replaces (its value, as read): only while it is still that entry,
	// unmoved since it was read. Empty: none was seen.
	Replacing string
}

// value is the entry as stored: what its beats are conditional on sorts
// first, and the counter, fixed width, orders beats of one entry.
func (b Beat) value() string {
	c := strconv.FormatInt(max(b.Counter, 0), 36)
	if len(c) < counterWidth {
		c = strings.Repeat("0", counterWidth-len(c)) + c
	}
	return b.prefix() + c + " " + strconv.FormatInt(max(b.Profile, 0), 36)
}

// Value is the entry as stored (what Replacing names).
func (b Beat) Value() string { return b.value() }

// upToCounter is the entry's value without its profile.
func (b Beat) upToCounter() string {
	v := b.value()
	return v[:strings.LastIndexByte(v, ' ')+1]
}

// prefix is the part of the entry's value that names the entry: its
// process and its birth.
func (b Beat) prefix() string { return b.Nonce + " " + b.Born + " " }

// counterWidth is the width of a beat's counter in base 36: more beats than
// a process sends in ninety thousand years at one a second.
const counterWidth = 8

// parseBeat reads an entry; ok is false for one that is not a beat's (a
// hand edit), which is left out.
func parseBeat(id string, bucket int, v types.AttributeValue) (Beat, bool) {
	s, isS := v.(*types.AttributeValueMemberS)
	if !isS {
		return Beat{}, false
	}
	f := strings.Fields(s.Value)
	if len(f) != 4 {
		return Beat{}, false
	}
	counter, err1 := strconv.ParseInt(f[2], 36, 64)
	profile, err2 := strconv.ParseInt(f[3], 36, 64)
	if err1 != nil || err2 != nil {
		return Beat{}, false
	}
	return Beat{ID: id, Nonce: f[0], Born: f[1], Counter: counter, Profile: profile, Bucket: bucket}, true
}

// NewBorn returns a random id for a roster entry (Beat.Born).
func NewBorn() string { return NewWriteID()[:8] }

func rosterKey(streamID string, bucket int) string {
	return streamID + ":roster:" + strconv.Itoa(bucket)
}

// Poll is what a lease cycle reads every time: the stream's item (with its
// change counter) and the beats of its instances.
type Poll struct {
	Stream *Stream // nil when the stream has no item yet
	Beats  []Beat
}

// decodePoll reads the items of a poll: the stream's and its roster items'.
func decodePoll(streamID string, items []map[string]types.AttributeValue) (Poll, error) {
	var p Poll
	for _, item := range items {
		if item == nil {
			continue
		}
		key := getS(item, attrKey)
		if key == streamKey(streamID) {
			st, err := decodeStream(item)
			if err != nil {
				return Poll{}, err
			}
			p.Stream = &st
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(key, streamID+":roster:"))
		if err != nil {
			continue
		}
		m, _ := item[attrBeats].(*types.AttributeValueMemberM)
		if m == nil {
			continue
		}
		for id, v := range m.Value {
			if b, ok := parseBeat(id, n, v); ok {
				p.Beats = append(p.Beats, b)
			}
		}
	}
	// In the order of the instances (a map's order is random): what a
	// poll shows, and the reads it leads to, do not depend on it.
	slices.SortFunc(p.Beats, func(a, b Beat) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(a.Bucket, b.Bucket))
	})
	return p, nil
}

// Poll reads the stream's item and every roster item it names, eventually
// consistent, one GetItem each (a BatchGetItem would cost the same read
// units, and an IAM action the input did not need before). Announcements
// that failed earlier are sent first (see announce).
func (t *Table) Poll(ctx context.Context, streamARN string) (Poll, error) {
	t.announceOwed(ctx, streamARN)
	what := "reading the roster of stream " + streamARN
	item, err := t.readItem(ctx, streamKey(streamARN), false, what)
	if err != nil {
		return Poll{}, err
	}
	items := []map[string]types.AttributeValue{item}
	rosters, _ := getN(item, attrRosters) // at least the first, and as many as seen before: the stream's item may be gone
	for n := range min(max(int(rosters), t.rostersOf(streamARN), 1), maxRosters) {
		r, err := t.readItem(ctx, rosterKey(streamARN, n), false, what)
		if err != nil {
			return Poll{}, err
		}
		items = append(items, r)
	}
	t.setRosters(streamARN, int(rosters))
	p, err := decodePoll(streamARN, items)
	if err != nil {
		return Poll{}, fmt.Errorf("DynamoDB table %q: %w", t.name, err)
	}
	return p, nil
}

// GetBeat reads an instance's entry in roster item bucket, strongly
// consistent; ok is false when there is none.
func (t *Table) GetBeat(ctx context.Context, streamARN string, bucket int, id string) (Beat, bool, error) {
	item, err := t.getItem(ctx, rosterKey(streamARN, bucket), "reading the beat of instance "+id)
	if err != nil || item == nil {
		return Beat{}, false, err
	}
	m, _ := item[attrBeats].(*types.AttributeValueMemberM)
	if m == nil {
		return Beat{}, false, nil
	}
	b, ok := parseBeat(id, bucket, m.Value[id])
	return b, ok, nil
}

// Beat writes my entry b in the roster: in b.Bucket, over my entry of the
// same process and birth with a lower counter. When the entry is not there
// (the process beats for the first time, or was removed as dead) it is
// written anew, with a new Born, in b.Bucket if that is set (>= 0) and
// else in the first roster item with room; an entry of another process
// (another nonce) makes it ErrDuplicateInstance and changes nothing, unless
// takeOver. A beat that lands after a later one of the same entry (held up
// on its way) changes nothing. It returns the entry as it stands.
func (t *Table) Beat(ctx context.Context, streamARN, me string, b Beat, takeOver bool) (Beat, error) {
	b.ID = me
	what := "beating for instance " + me
	if b.Bucket >= 0 && b.Born != "" {
		err := t.updateBeat(ctx, streamARN, b, "begins_with(#b.#me, :p) AND #b.#me < :v")
		if err == nil || !conditionFailed(err) {
			if err != nil {
				return b, t.fail(what, err)
			}
			return b, nil
		}
		now, ok, err := t.GetBeat(ctx, streamARN, b.Bucket, me)
		switch {
		case err != nil:
			return b, err
		case ok && now.Nonce == b.Nonce && now.Born == b.Born:
			return now, nil // a later beat of the entry is there
		case ok && now.Nonce == b.Nonce:
			b.Born = now.Born // my own entry, written anew by a write whose answer was lost
			return t.Beat(ctx, streamARN, me, b, takeOver)
		case ok && (!takeOver || now.value() != b.Replacing):
			return b, ErrDuplicateInstance
		}
	}
	b.Born = NewBorn()
	return t.joinRoster(ctx, streamARN, b, takeOver)
}

// updateBeat sets my entry to b's value in its roster item, under cond
// (on #b.#me, with :p the entry's prefix and :v its value).
func (t *Table) updateBeat(ctx context.Context, streamARN string, b Beat, cond string) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(rosterKey(streamARN, b.Bucket))},
		UpdateExpression:          aws.String("SET #b.#me = :v"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#b": attrBeats, "#me": b.ID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": str(b.value()), ":p": str(b.prefix())},
	})
	return err
}

// joinRoster writes b anew: in b.Bucket when set (the entry's item stays
// its item for the process's life), else in the first roster item with
// room, created when none has any. With takeOver it replaces the entry
// b.Replacing of another process, only while that entry is unmoved: a
// process that beat since it was read lives (the read may have been
// answered late), and the join is ErrDuplicateInstance.
func (t *Table) joinRoster(ctx context.Context, streamARN string, b Beat, takeOver bool) (Beat, error) {
	what := "joining the roster of stream " + streamARN + " as instance " + b.ID
	cond := "attribute_not_exists(#b.#me) OR begins_with(#b.#me, :n)"
	values := map[string]types.AttributeValue{":v": str(b.value()), ":n": str(b.Nonce + " ")}
	if takeOver {
		cond = "attribute_exists(#b) AND (" + cond + " OR #b.#me = :old)"
		values[":old"] = str(b.Replacing)
	}
	start := max(b.Bucket, 0)
	for n := start; n < maxRosters; n++ {
		if b.Bucket < 0 {
			item, err := t.getItem(ctx, rosterKey(streamARN, n), what)
			if err != nil {
				return b, err
			}
			if item == nil {
				if err := t.createRoster(ctx, streamARN, n); err != nil {
					return b, err
				}
				item = emptyRoster(streamARN, n)
			}
			if m, _ := item[attrBeats].(*types.AttributeValueMemberM); m != nil {
				if _, mine := m.Value[b.ID]; !mine && ddbcost.ItemSize(item)+len(b.ID)+len(b.value())+2 > rosterRoom {
					continue
				}
			}
		}
		b.Bucket = n
		_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(t.name),
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
			Key:                       map[string]types.AttributeValue{attrKey: str(rosterKey(streamARN, n))},
			UpdateExpression:          aws.String("SET #b.#me = :v"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#b": attrBeats, "#me": b.ID},
			ExpressionAttributeValues: values,
		})
		switch {
		case err == nil:
			return b, nil
		case conditionFailed(err) && !takeOver:
			return b, ErrDuplicateInstance
		case conditionFailed(err):
			// Another process's entry moved, or the roster item is gone
			// (the stream's items were deleted): made again.
			item, gerr := t.getItem(ctx, rosterKey(streamARN, n), what)
			if gerr != nil {
				return b, gerr
			}
			if item != nil {
				return b, ErrDuplicateInstance
			}
			if err := t.createRoster(ctx, streamARN, n); err != nil {
				return b, err
			}
			n--
			continue
		default:
			return b, t.fail(what, err)
		}
	}
	return b, fmt.Errorf("DynamoDB table %q: %s: %w", t.name, what, errRosterFull)
}

// errRosterFull is the error of a join to a roster whose every item is
// full: more instances on one stream than maxRosters items hold.
var errRosterFull = fmt.Errorf("all %d roster items of the stream are full: run fewer instances on one stream, or give them shorter instance_ids", maxRosters)

func emptyRoster(streamID string, n int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: str(rosterKey(streamID, n)), attrBeats: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}
}

// createRoster writes roster item n, empty, unless it exists, and counts
// it in the stream's item.
func (t *Table) createRoster(ctx context.Context, streamARN string, n int) error {
	what := "creating roster item " + strconv.Itoa(n) + " of stream " + streamARN
	if _, err := t.putNew(ctx, emptyRoster(streamARN, n), what); err != nil {
		return err
	}
	err := t.updateStream(ctx, streamARN, "SET #r = :n", "attribute_exists(#k) AND (attribute_not_exists(#r) OR #r < :n)",
		map[string]string{"#r": attrRosters, "#k": attrKey}, map[string]types.AttributeValue{":n": num(int64(n + 1))})
	if err != nil && !conditionFailed(err) {
		return t.fail(what, err)
	}
	t.setRosters(streamARN, n+1)
	return nil
}

// RemoveBeat deletes an instance's entry while it is the entry seen (its
// process, birth and counter; whatever its profile): the beat of a dead instance, removed by
// anyone once it expired. removed says whether it was deleted.
func (t *Table) RemoveBeat(ctx context.Context, streamARN string, seen Beat) (removed bool, err error) {
	_, err = t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(rosterKey(streamARN, seen.Bucket))},
		UpdateExpression:          aws.String("REMOVE #b.#id"),
		ConditionExpression:       aws.String("begins_with(#b.#id, :v)"),
		ExpressionAttributeNames:  map[string]string{"#b": attrBeats, "#id": seen.ID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": str(seen.upToCounter())},
	})
	switch {
	case conditionFailed(err):
		return false, nil
	case err != nil:
		return false, t.fail("removing the beat of expired instance "+seen.ID, err)
	}
	return true, nil
}

// LeaveRoster deletes my entry in roster item bucket, whatever it holds.
func (t *Table) LeaveRoster(ctx context.Context, streamARN, me string, bucket int) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(t.name),
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
		Key:                      map[string]types.AttributeValue{attrKey: str(rosterKey(streamARN, bucket))},
		UpdateExpression:         aws.String("REMOVE #b.#id"),
		ConditionExpression:      aws.String("attribute_exists(#b)"),
		ExpressionAttributeNames: map[string]string{"#b": attrBeats, "#id": me},
	})
	if err != nil && !conditionFailed(err) {
		return t.fail("removing the beat of instance "+me, err)
	}
	return nil
}

// rostersOf is how many roster items the stream had at the last poll.
func (t *Table) rostersOf(streamID string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rosters[streamID]
}

func (t *Table) setRosters(streamID string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n > t.rosters[streamID] {
		t.rosters[streamID] = n
	}
}

// updateStream updates the stream's item by expr, under cond.
func (t *Table) updateStream(ctx context.Context, streamID, expr, cond string, names map[string]string, values map[string]types.AttributeValue, opts ...func(*dynamodb.Options)) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		Key:                       map[string]types.AttributeValue{attrKey: str(streamKey(streamID))},
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, opts...)
	return err
}
