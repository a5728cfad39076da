package lease

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The Store methods of Memory. Each states its condition in the words of
// the *Table method of its name, whose doc comment is the contract.

// Scan returns every item of a stream. Memory has no stale reads: Scan is
// ScanConsistent.
func (m *Memory) Scan(ctx context.Context, streamARN string) (Scan, error) {
	return m.scan(ctx, "Scan", streamARN)
}

// ScanConsistent returns every item of a stream.
func (m *Memory) ScanConsistent(ctx context.Context, streamARN string) (Scan, error) {
	return m.scan(ctx, "ScanConsistent", streamARN)
}

func (m *Memory) scan(ctx context.Context, op, streamARN string) (Scan, error) {
	if err := m.enter(ctx, op); err != nil {
		return Scan{}, err
	}
	defer m.mu.Unlock()
	m.chargeScan(op == "ScanConsistent")
	var out Scan
	for _, key := range slices.Sorted(maps.Keys(m.items)) {
		if item := m.items[key]; eqS(item, attrStream, streamARN) {
			if err := out.add(item); err != nil {
				return Scan{}, m.wrap(err)
			}
		}
	}
	for i := range out.Broken {
		out.Broken[i].Err = m.wrap(out.Broken[i].Err)
	}
	return out, nil
}

// Get reads the item of a shard; ok is false when there is none.
func (m *Memory) Get(ctx context.Context, streamARN, shardID string) (s Shard, ok bool, err error) {
	if err := m.enter(ctx, "Get"); err != nil {
		return Shard{}, false, err
	}
	defer m.mu.Unlock()
	item := m.items[ShardKey(streamARN, shardID)]
	m.chargeGet(ShardKey(streamARN, shardID), true)
	if item == nil {
		return Shard{}, false, nil
	}
	s, err = decodeShard(item)
	if err != nil {
		return Shard{}, false, m.wrap(err)
	}
	return s, true, nil
}

// Create writes the item of a new, free shard unless one exists, and
// returns the item stored afterwards.
func (m *Memory) Create(ctx context.Context, s Shard) (got Shard, created bool, err error) {
	if err := m.enter(ctx, "Create"); err != nil {
		return Shard{}, false, err
	}
	defer m.mu.Unlock()
	s.Owner, s.Counter, s.HandoffTo = "", 0, ""
	if existing := m.items[s.Key()]; existing != nil {
		m.chargeWrite("PutItem", s.Key(), existing)
		m.chargeGet(s.Key(), true)
		got, err := decodeShard(existing)
		return got, false, m.wrap(err)
	}
	m.items[s.Key()] = encodeShard(s)
	m.chargeWrite("PutItem", s.Key(), nil)
	return s, true, nil
}

// Hold writes as the holder of a shard's lease, conditional on owner me at
// counter, or at the next one after w.After (and, for a handover, on
// handoffTo being the taker); it moves the counter by one. ErrLost, or ErrWithdrawn when only the handover's taker is gone.
func (m *Memory) Hold(ctx context.Context, streamARN, shardID, me string, counter int64, w Write) (Shard, error) {
	if err := m.enter(ctx, "Hold"); err != nil {
		return Shard{}, err
	}
	defer m.mu.Unlock()
	key := ShardKey(streamARN, shardID)
	item := m.items[key]
	defer m.chargeWrite("UpdateItem", key, item)
	held := eqS(item, attrOwner, me) && (eqN(item, attrCounter, counter) ||
		(w.After != "" && eqN(item, attrCounter, counter+1) && eqS(item, attrWriteID, w.After)))
	handover := w.Release && w.HandOver != ""
	if !held {
		return Shard{}, ErrLost
	}
	at, _ := getN(item, attrCounter)
	if handover && (!eqS(item, attrHandoffTo, w.HandOver) || (w.HandOverNonce != "" && !eqS(item, attrHandoffNonce, w.HandOverNonce))) {
		s, err := decodeShard(item)
		if err != nil {
			return Shard{}, m.wrap(err)
		}
		return s, ErrWithdrawn
	}
	sets := map[string]types.AttributeValue{attrCounter: num(at + 1), attrWriteID: str(cmp.Or(w.ID, NewWriteID()))}
	var removes []string
	if w.Checkpoint != nil {
		set, remove := checkpointValues(*w.Checkpoint)
		maps.Copy(sets, set)
		removes = append(removes, remove...)
	}
	if !w.KeepAsked {
		removes = append(removes, attrHandoffTo, attrHandoffNonce)
	}
	switch {
	case handover:
		sets[attrOwner] = str(w.HandOver)
		sets[attrHandedOver] = &types.AttributeValueMemberBOOL{Value: true}
		if w.HandOverNonce != "" {
			sets[attrOwnerNonce] = str(w.HandOverNonce)
		} else {
			removes = append(removes, attrOwnerNonce)
		}
	case w.Release:
		removes = append(removes, attrOwner, attrOwnerNonce)
	}
	item = update(item, sets, removes...)
	m.items[key] = item
	if !w.KeepAsked {
		m.announce(streamARN, shardID)
	}
	return decodeShard(item)
}

// Take makes me (the process of nonce) the owner of a shard's lease as
// scanned: free (no owner) or held by s.Owner, at s.Counter. It moves the
// counter and drops an ask.
func (m *Memory) Take(ctx context.Context, s Shard, me, nonce string) (Shard, error) {
	if err := m.enter(ctx, "Take"); err != nil {
		return Shard{}, err
	}
	defer m.mu.Unlock()
	item := m.items[s.Key()]
	m.chargeWrite("UpdateItem", s.Key(), item) // the larger of before and after: a take changes no size that matters
	owner := free(item)
	if s.Owner != "" {
		owner = eqS(item, attrOwner, s.Owner)
	}
	if !owner || !eqN(item, attrCounter, s.Counter) {
		return Shard{}, ErrLost
	}
	item = update(item, map[string]types.AttributeValue{attrOwner: str(me), attrCounter: num(s.Counter + 1), attrTakenAt: num(s.Counter + 1)}, attrHandoffTo, attrHandoffNonce, attrOwnerNonce, attrWriteID, attrHandedOver)
	if nonce != "" {
		item[attrOwnerNonce] = str(nonce)
	}
	m.items[s.Key()] = item
	m.announce(s.Stream, s.ShardID)
	return decodeShard(item)
}

// Ask sets handoffTo to me (and handoffNonce to nonce) while s.Owner holds
// the lease and no one asked; the counter stays. ErrLost otherwise.
func (m *Memory) Ask(ctx context.Context, s Shard, me, nonce string) error {
	if err := m.enter(ctx, "Ask"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	item := m.items[s.Key()]
	defer m.chargeWrite("UpdateItem", s.Key(), item)
	if !eqS(item, attrOwner, s.Owner) || has(item, attrHandoffTo) {
		return ErrLost
	}
	item = update(item, map[string]types.AttributeValue{attrHandoffTo: str(me)}, attrHandoffNonce)
	if nonce != "" {
		item[attrHandoffNonce] = str(nonce)
	}
	m.items[s.Key()] = item
	m.announce(s.Stream, s.ShardID)
	return nil
}

// Withdraw removes handoffTo while it is me; otherwise it does nothing.
func (m *Memory) Withdraw(ctx context.Context, s Shard, me string) error {
	if err := m.enter(ctx, "Withdraw"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	item := m.items[s.Key()]
	defer m.chargeWrite("UpdateItem", s.Key(), item)
	if eqS(item, attrHandoffTo, me) {
		m.items[s.Key()] = update(item, nil, attrHandoffTo, attrHandoffNonce)
		m.announce(s.Stream, s.ShardID)
	}
	return nil
}

// Delete removes the item of a shard unless it has an owner.
func (m *Memory) Delete(ctx context.Context, streamARN, shardID string) error {
	if err := m.enter(ctx, "Delete"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	key := ShardKey(streamARN, shardID)
	defer m.chargeWrite("DeleteItem", key, m.items[key])
	if item := m.items[key]; item != nil && free(item) {
		delete(m.items, key)
		m.announce(streamARN, shardID)
	}
	return nil
}

// Replace overwrites the item of a shard whose start is was with s, free,
// continuing its counter; an item that is gone or has another start stays.
func (m *Memory) Replace(ctx context.Context, s Shard, was string) error {
	if err := m.enter(ctx, "Replace"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.chargeGet(s.Key(), true)
	defer m.chargeWrite("PutItem", s.Key(), m.items[s.Key()])
	next, _, ok, err := replacing(m.items[s.Key()], was, s.Created)
	if err != nil || !ok {
		return m.wrap(err)
	}
	s.Owner, s.HandoffTo, s.Counter = "", "", next
	m.items[s.Key()] = encodeShard(s)
	m.announce(s.Stream, s.ShardID)
	return nil
}

// Overwrite writes the item of a shard as s, free, while it is as prev was
// read (absent when prev is nil), at the counter after prev's. ErrLost
// otherwise.
func (m *Memory) Overwrite(ctx context.Context, s Shard, prev *Shard) error {
	if err := m.enter(ctx, "Overwrite"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	item := m.items[s.Key()]
	defer m.chargeWrite("PutItem", s.Key(), item)
	s.Owner, s.HandoffTo, s.Counter = "", "", 0
	switch {
	case prev == nil && item != nil:
		return ErrLost
	case prev != nil && !eqN(item, attrCounter, prev.Counter):
		return ErrLost
	case prev != nil:
		s.Counter = prev.Counter + 1
	}
	m.items[s.Key()] = encodeShard(s)
	m.announce(s.Stream, s.ShardID)
	return nil
}

// ReplaceMalformed replaces (s set) or deletes (s nil) a malformed item
// as read, while its counter attribute is as read; ErrLost otherwise.
func (m *Memory) ReplaceMalformed(ctx context.Context, was BrokenItem, s *Shard) error {
	if err := m.enter(ctx, "ReplaceMalformed"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	defer m.chargeWrite("PutItem", was.Key, m.items[was.Key])
	if !stillAsRead(m.items[was.Key], was) {
		return ErrLost
	}
	if s == nil {
		delete(m.items, was.Key)
	} else {
		c := *s
		c.Owner, c.HandoffTo, c.Counter = "", "", 1
		m.items[was.Key] = encodeShard(c)
	}
	m.announce(brokenStream(was, s), anyShard)
	return nil
}

// PutStream writes the item of a stream unless one exists, and returns the
// one stored afterwards, and whether it is the one written.
func (m *Memory) PutStream(ctx context.Context, s Stream) (Stream, bool, error) {
	if err := m.enter(ctx, "PutStream"); err != nil {
		return Stream{}, false, err
	}
	defer m.mu.Unlock()
	if existing := m.items[streamKey(s.ARN)]; existing != nil {
		m.chargeWrite("PutItem", streamKey(s.ARN), existing)
		m.chargeGet(streamKey(s.ARN), true)
		got, err := decodeStream(existing)
		return got, false, err
	}
	m.items[streamKey(s.ARN)] = encodeStream(s)
	m.chargeWrite("PutItem", streamKey(s.ARN), nil)
	return s, true, nil
}

// ReplaceStream overwrites the item of a stream.
func (m *Memory) ReplaceStream(ctx context.Context, s Stream) error {
	if err := m.enter(ctx, "ReplaceStream"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	item := encodeStream(s)
	defer m.chargeWrite("UpdateItem", streamKey(s.ARN), m.items[streamKey(s.ARN)])
	if old := m.items[streamKey(s.ARN)]; old != nil {
		for _, k := range []string{attrChanges, attrRosters} {
			if v, ok := old[k]; ok {
				item[k] = v
			}
		}
	}
	m.items[streamKey(s.ARN)] = item
	m.announce(s.ARN, anyShard)
	return nil
}

// Heartbeat moves the counter of my worker item, creating it, and writes
// nonce; unless takeOver, only while the item has no nonce or this one
// (ErrDuplicateInstance otherwise).
func (m *Memory) Heartbeat(ctx context.Context, streamARN, me string, p Presence, takeOver bool) error {
	if err := m.enter(ctx, "Heartbeat"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	key := workerKey(streamARN, me)
	item := m.items[key]
	defer m.chargeWrite("UpdateItem", key, item)
	if !takeOver && has(item, attrNonce) && !eqS(item, attrNonce, p.Nonce) {
		return ErrDuplicateInstance
	}
	n := counterBase(p)
	if has(item, attrCounter) {
		n, _ = getN(item, attrCounter)
	}
	set := map[string]types.AttributeValue{
		attrKey: str(key), attrKind: str(kindWorker), attrStream: str(streamARN), attrOwner: str(me),
		attrCounter: num(n + 1), attrNonce: str(p.Nonce), attrLoads: encodeLoads(p.Loads), attrHeld: encodeHeld(p.Held),
	}
	var remove []string
	if p.Born != "" && !has(item, attrBorn) {
		set[attrBorn] = str(p.Born)
	}
	if p.Roster {
		set[attrRosterBeats] = &types.AttributeValueMemberBOOL{Value: true}
		set[attrProfile] = num(p.Profile)
	}
	if p.Config != nil {
		set[attrConfig] = encodeConfig(p.Config)
	} else {
		remove = append(remove, attrConfig)
	}
	m.items[key] = update(item, set, remove...)
	return nil
}

// GetWorker reads the worker item of instance id; ok is false when there is
// none.
func (m *Memory) GetWorker(ctx context.Context, streamARN, id string) (w Worker, ok bool, err error) {
	if err := m.enter(ctx, "GetWorker"); err != nil {
		return Worker{}, false, err
	}
	defer m.mu.Unlock()
	item := m.items[workerKey(streamARN, id)]
	m.chargeGet(workerKey(streamARN, id), true)
	if item == nil {
		return Worker{}, false, nil
	}
	return decodeWorker(item), true, nil
}

// RemoveWorker deletes the worker item of an instance while it is the item
// seen (its counter and Born), and says whether it did; otherwise it does
// nothing.
func (m *Memory) RemoveWorker(ctx context.Context, streamARN string, seen Worker) (bool, error) {
	if err := m.enter(ctx, "RemoveWorker"); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	key := workerKey(streamARN, seen.ID)
	defer m.chargeWrite("DeleteItem", key, m.items[key])
	if item := m.items[key]; item != nil && eqN(item, attrCounter, seen.Counter) && getS(item, attrBorn) == seen.Born {
		delete(m.items, key)
		return true, nil
	}
	return false, nil
}

// Leave deletes my worker item.
func (m *Memory) Leave(ctx context.Context, streamARN, me string) error {
	if err := m.enter(ctx, "Leave"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	defer m.chargeWrite("DeleteItem", workerKey(streamARN, me), m.items[workerKey(streamARN, me)])
	delete(m.items, workerKey(streamARN, me))
	return nil
}

// ClaimRegistration claims the registration of a stream consumer for me:
// true unless someone else claimed it.
func (m *Memory) ClaimRegistration(ctx context.Context, streamARN, consumer, me string) (bool, error) {
	if err := m.enter(ctx, "ClaimRegistration"); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	key := registrationKey(streamARN, consumer)
	defer m.chargeWrite("PutItem", key, m.items[key])
	if item := m.items[key]; item != nil && !eqS(item, attrOwner, me) {
		return false, nil
	}
	m.items[key] = map[string]types.AttributeValue{
		attrKey: str(key), attrKind: str(kindRegistration), attrStream: str(streamARN), attrOwner: str(me),
	}
	return true, nil
}

// DropRegistration removes the claim on a consumer's registration.
func (m *Memory) DropRegistration(ctx context.Context, streamARN, consumer string) error {
	if err := m.enter(ctx, "DropRegistration"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	defer m.chargeWrite("DeleteItem", registrationKey(streamARN, consumer), m.items[registrationKey(streamARN, consumer)])
	delete(m.items, registrationKey(streamARN, consumer))
	return nil
}
