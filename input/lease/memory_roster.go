package lease

import (
	"context"
	"maps"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

// The roster of Memory (see roster.go): the same items, the same
// conditions. Memory has no stale reads and no lost answers.

// Poll returns the stream's item and the beats of every roster item.
func (m *Memory) Poll(ctx context.Context, streamARN string) (Poll, error) {
	if err := m.enter(ctx, "Poll"); err != nil {
		return Poll{}, err
	}
	defer m.mu.Unlock()
	item := m.items[streamKey(streamARN)]
	items := []map[string]types.AttributeValue{item}
	m.chargeGet(streamKey(streamARN), false)
	rosters, _ := getN(item, attrRosters)
	for n := range min(max(int(rosters), 1), maxRosters) {
		items = append(items, m.items[rosterKey(streamARN, n)])
		m.chargeGet(rosterKey(streamARN, n), false)
	}
	p, err := decodePoll(streamARN, items)
	return p, m.wrap(err)
}

// GetBeat reads an instance's entry in roster item bucket.
func (m *Memory) GetBeat(ctx context.Context, streamARN string, bucket int, id string) (Beat, bool, error) {
	if err := m.enter(ctx, "GetBeat"); err != nil {
		return Beat{}, false, err
	}
	defer m.mu.Unlock()
	m.chargeGet(rosterKey(streamARN, bucket), true)
	b, ok := m.beat(streamARN, bucket, id)
	return b, ok, nil
}

// beat is an entry as stored. Must hold m.mu.
func (m *Memory) beat(streamARN string, bucket int, id string) (Beat, bool) {
	beats, _ := m.items[rosterKey(streamARN, bucket)][attrBeats].(*types.AttributeValueMemberM)
	if beats == nil {
		return Beat{}, false
	}
	return parseBeat(id, bucket, beats.Value[id])
}

// setBeat stores an entry (nil: removes it). Must hold m.mu.
func (m *Memory) setBeat(streamARN string, bucket int, id string, v types.AttributeValue) {
	key := rosterKey(streamARN, bucket)
	item := m.items[key]
	defer m.chargeWrite("UpdateItem", key, item)
	if item == nil {
		item = emptyRoster(streamARN, bucket)
		if st := m.items[streamKey(streamARN)]; st != nil {
			if n, _ := getN(st, attrRosters); n < int64(bucket+1) {
				m.items[streamKey(streamARN)] = update(st, map[string]types.AttributeValue{attrRosters: num(int64(bucket + 1))})
			}
		}
	}
	old, _ := item[attrBeats].(*types.AttributeValueMemberM)
	beats := map[string]types.AttributeValue{}
	if old != nil {
		beats = maps.Clone(old.Value)
	}
	if v == nil {
		delete(beats, id)
	} else {
		beats[id] = v
	}
	m.items[key] = update(item, map[string]types.AttributeValue{attrBeats: &types.AttributeValueMemberM{Value: beats}})
}

// Beat writes my entry: over my entry of the same process and birth with
// a lower counter; anew (a new Born) when it is gone, in b.Bucket when set
// and else the first roster item with room; ErrDuplicateInstance over
// another process's entry unless takeOver and it is b.Replacing.
func (m *Memory) Beat(ctx context.Context, streamARN, me string, b Beat, takeOver bool) (Beat, error) {
	if err := m.enter(ctx, "Beat"); err != nil {
		return b, err
	}
	defer m.mu.Unlock()
	b.ID = me
	if b.Bucket >= 0 {
		now, ok := m.beat(streamARN, b.Bucket, me)
		switch {
		case ok && now.Nonce == b.Nonce && now.Born == b.Born:
			if now.Counter < b.Counter || (now.Counter == b.Counter && now.Profile < b.Profile) {
				m.setBeat(streamARN, b.Bucket, me, str(b.value()))
				return b, nil
			}
			return now, nil
		case ok && now.Nonce == b.Nonce:
			b.Born = now.Born
			if now.Counter < b.Counter {
				m.setBeat(streamARN, b.Bucket, me, str(b.value()))
				return b, nil
			}
			return now, nil
		case ok && (!takeOver || now.value() != b.Replacing):
			return b, ErrDuplicateInstance
		}
	}
	b.Born = NewBorn()
	for n := max(b.Bucket, 0); n < maxRosters; n++ {
		if b.Bucket < 0 {
			item := m.items[rosterKey(streamARN, n)]
			if item == nil {
				item = emptyRoster(streamARN, n)
			}
			if ddbcost.ItemSize(item)+len(me)+len(b.value())+2 > rosterRoom {
				continue
			}
		}
		if now, ok := m.beat(streamARN, n, me); ok && now.Nonce != b.Nonce && (!takeOver || now.value() != b.Replacing) {
			return b, ErrDuplicateInstance
		}
		b.Bucket = n
		m.setBeat(streamARN, n, me, str(b.value()))
		return b, nil
	}
	return b, m.wrap(errRosterFull)
}

// RemoveBeat deletes an entry while it is the entry seen.
func (m *Memory) RemoveBeat(ctx context.Context, streamARN string, seen Beat) (bool, error) {
	if err := m.enter(ctx, "RemoveBeat"); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	now, ok := m.beat(streamARN, seen.Bucket, seen.ID)
	if !ok || now.upToCounter() != seen.upToCounter() {
		m.chargeWrite("UpdateItem", rosterKey(streamARN, seen.Bucket), nil)
		return false, nil
	}
	m.setBeat(streamARN, seen.Bucket, seen.ID, nil)
	return true, nil
}

// LeaveRoster deletes my entry in roster item bucket.
func (m *Memory) LeaveRoster(ctx context.Context, streamARN, me string, bucket int) error {
	if err := m.enter(ctx, "LeaveRoster"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.items[rosterKey(streamARN, bucket)] != nil {
		m.setBeat(streamARN, bucket, me, nil)
	}
	return nil
}
