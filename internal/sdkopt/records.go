package sdkopt

import (
	"bytes"
	"context"
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

type recordsProtocol struct {
	smithyhttp.ClientProtocol

	bodies sync.Pool // *bytes.Buffer, GetRecords bodies (concurrent calls)

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
	buf, _ := p.bodies.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer p.bodies.Put(buf)
	buf.Reset()
	if n := resp.ContentLength; n > 0 {
		buf.Grow(int(n))
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
	msg, err := p.events.Decode(r, p.payload[:0])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	// Reuse the payload's buffer while events are large (a backlog), but
	// let a large one go once they are small again: an idle shard keeps a
	// few kilobytes, not the megabyte of its largest event.
	if len(msg.Payload) < 64<<10 && cap(msg.Payload) > 256<<10 {
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
