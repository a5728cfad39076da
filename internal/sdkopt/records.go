package sdkopt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/benthos-kinesis/benthos-kinesis/internal/recordjson"
)

// FastRecords gives a Kinesis client (or one call) a protocol instance of
// its own whose GetRecords responses and SubscribeToShard events are decoded
// by recordjson: a few allocations per response instead of several per
// record, and response bodies read into reused buffers of their exact size
// rather than buffers grown by doubling. Everything else is the SDK's
// protocol. Its own instance also keeps SubscribeToShard clear of the
// shared codec's data race (see OwnProtocol).
func FastRecords(o *kinesis.Options) {
	o.Protocol = &recordsProtocol{ClientProtocol: awsjson.New11(schemas.Kinesis_20131202)}
}

// maxEventBytes bounds the buffer made ahead for an event message: a
// SubscribeToShard event holds about 1 MiB of records, or one record of up
// to 10 MiB on a stream that takes them (since 2025: as JSON, base64 data,
// under 14 MiB); a length beyond this is left to the decoder, which
// rejects what is malformed.
const maxEventBytes = 16 << 20

type recordsProtocol struct {
	smithyhttp.ClientProtocol
	gate *EventGate // nil: events are decoded as the SDK asks
	// body, when set, is told a GetRecords answer's length before its
	// body is read (see BodyGate).
	body func(n int64) error

	// Event messages of the one subscription this instance serves.
	events  *eventstream.Decoder
	payload []byte
}

// DeserializeResponse decodes a successful GetRecords response itself.
func (p *recordsProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	o, ok := out.(*kinesis.GetRecordsOutput)
	if !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
	}
	if p.body != nil && resp.ContentLength > 0 {
		if err := p.body(resp.ContentLength); err != nil {
			return &smithy.DeserializationError{Err: err}
		}
	}
	// A buffer of the body's size, garbage once decoded: kept in a pool,
	// the bodies of every shard would stay live between calls and raise
	// the heap the garbage collector lets grow before it runs.
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return &smithy.DeserializationError{Err: err}
	}
	doc, err := recordjson.Decode(buf.Bytes())
	if err != nil {
		return &smithy.DeserializationError{Err: err}
	}
	o.Records, o.ChildShards, o.MillisBehindLatest, o.NextShardIterator = doc.Records, doc.ChildShards, doc.MillisBehindLatest, doc.NextShardIterator
	return nil
}

// DeserializeEventMessage decodes a SubscribeToShardEvent itself; any other
// message (an exception, an unknown event) goes to the SDK's codec as it
// came.
func (p *recordsProtocol) DeserializeEventMessage(schema *smithy.Schema, reg *smithy.TypeRegistry, r io.Reader) (smithy.Deserializable, error) {
	if p.events == nil {
		p.events = eventstream.NewDecoder()
	}
	if p.gate != nil {
		select {
		case <-p.gate.tokens:
		case <-p.gate.done:
			return nil, io.EOF
		}
	}
	// The message's total length leads its prelude: with room for all of
	// it (and the read that finds its end), the payload is read into the
	// buffer without growing it by doubling.
	var total [4]byte
	if _, err := io.ReadFull(r, total[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	if p.gate != nil && p.gate.sized != nil {
		// The caller takes room for the event before it is decoded.
		select {
		case p.gate.sized <- int(binary.BigEndian.Uint32(total[:])):
		case <-p.gate.done:
			return nil, io.EOF
		}
		select {
		case <-p.gate.decode:
		case <-p.gate.done:
			return nil, io.EOF
		}
	}
	if n := int(binary.BigEndian.Uint32(total[:])) + bytes.MinRead; cap(p.payload) < n && n <= maxEventBytes {
		p.payload = make([]byte, 0, n)
	}
	msg, err := p.events.Decode(io.MultiReader(bytes.NewReader(total[:]), r), p.payload[:0])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	// Reuse the payload's buffer while events are large (a backlog), but
	// let a large one go once they are small again: an idle shard keeps a
	// few kilobytes, not the megabyte of its largest event.
	// Behind a sizing gate the caller's memory budget counts each event's
	// records, not a buffer kept between events: none is kept.
	if (len(msg.Payload) < 64<<10 && cap(msg.Payload) > 256<<10) || (p.gate != nil && p.gate.sized != nil) {
		p.payload = nil
	} else {
		p.payload = msg.Payload[:0]
	}
	if mt, et := msg.Headers.Get(eventstream.MessageTypeHeader), msg.Headers.Get(eventstream.EventTypeHeader); mt != nil && et != nil &&
		mt.String() == eventstream.EventMessageType && et.String() == "SubscribeToShardEvent" {
		doc, err := recordjson.Decode(msg.Payload)
		if err != nil {
			return nil, err
		}
		return &types.SubscribeToShardEvent{
			Records: doc.Records, ChildShards: doc.ChildShards,
			MillisBehindLatest: doc.MillisBehindLatest, ContinuationSequenceNumber: doc.ContinuationSequenceNumber,
		}, nil
	}
	var frame bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&frame, msg); err != nil {
		return nil, err
	}
	return p.ClientProtocol.DeserializeEventMessage(schema, reg, &frame)
}

// BodyGate has one GetRecords call tell gate the length of its answer
// (its Content-Length) once the answer's headers came and before its body
// is read, so that the caller can take room for the records first: a
// stream of records up to 10 MiB answers up to 10 MiB whatever Limit asked
// for. While gate runs, the body waits in the connection (HTTP/2 flow
// control stops the sender). An error from gate fails the call with it,
// the body unread. The call decodes records as FastRecords does.
func BodyGate(gate func(n int64) error) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		inner := o.Protocol
		if rp, ok := inner.(*recordsProtocol); ok {
			inner = rp.ClientProtocol
		}
		if inner == nil {
			inner = awsjson.New11(schemas.Kinesis_20131202)
		}
		o.Protocol = &recordsProtocol{ClientProtocol: inner, body: gate}
	}
}

// EventGate paces the decoding of one subscription's events. The SDK's
// event stream reader decodes the next event as soon as it has handed one
// on, and two goroutines of its own each hold one the caller has not taken:
// two decoded events per subscription waiting on a slow pipeline. Through a
// gate an event is decoded only once the caller waits for it (Next): the
// network read goes on as before, within the stream's flow-control window.
//
// A sizing gate (NewSizingGate) goes in two steps: after Next, the next
// message's length is read and sent on Sized, and the message is decoded
// only once Decode is called, so that the caller can take room for it
// first (while a subscription waits for the service, it holds none).
type EventGate struct {
	tokens chan struct{}
	sized  chan int      // nil unless sizing
	decode chan struct{} // nil unless sizing
	done   chan struct{}
	once   sync.Once
}

// NewEventGate returns a closed gate: call Next to let an event through.
func NewEventGate() *EventGate {
	return &EventGate{tokens: make(chan struct{}, 1), done: make(chan struct{})}
}

// NewSizingGate returns a closed gate of two steps: call Next to let the
// next message's length be read, receive it from Sized, and call Decode
// to let the message be decoded.
func NewSizingGate() *EventGate {
	g := NewEventGate()
	g.sized, g.decode = make(chan int), make(chan struct{}, 1)
	return g
}

// Sized receives the total length in bytes of the next message, once read
// (a sizing gate; nil otherwise, which never receives).
func (g *EventGate) Sized() <-chan int { return g.sized }

// Decode lets the message whose length Sized gave be decoded.
func (g *EventGate) Decode() {
	select {
	case g.decode <- struct{}{}:
	default:
	}
}

// Option gives a SubscribeToShard call FastRecords decoding through the
// gate.
func (g *EventGate) Option(o *kinesis.Options) {
	o.Protocol = &recordsProtocol{ClientProtocol: awsjson.New11(schemas.Kinesis_20131202), gate: g}
}

// Next lets one more event be decoded: call it before waiting for one.
func (g *EventGate) Next() {
	select {
	case g.tokens <- struct{}{}:
	default:
	}
}

// Close ends a decoding waiting at the gate, as the stream ends: call it
// before closing the stream.
func (g *EventGate) Close() { g.once.Do(func() { close(g.done) }) }
