package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
)

// What the proxy counts: calls and capacity units by operation, and by
// operation and class of item ("UpdateItem/shard"), the class given by the
// classifier a test sets. The proxy knows nothing of the items it classes:
// a test that knows its table's key layout names them.

// requestInfo is what the proxy learned of a request before forwarding
// it, carried to its response in the request's context.
type requestInfo struct {
	op, class string
	body      []byte
}

type requestInfoKey struct{}

// Classify sets the classifier of requests: f gets the operation
// (UpdateItem) and the request's JSON body and returns the class of item
// it touches, which CallsByClass counts under "op/class". Calls made
// before it is set, or with f nil, are of class "". f is called on the
// request's goroutine, concurrently; it must not keep body.
func (p *DynamoDBProxy) Classify(f func(op string, body []byte) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.classify = f
}

// CallsByClass returns the calls so far and the capacity units they
// consumed by operation and class, keyed "op/class" (see Classify).
func (p *DynamoDBProxy) CallsByClass() (calls map[string]int64, units map[string]float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.classCalls), maps.Clone(p.classUnits)
}

// receive counts a request as it arrives, with its class, and returns
// the request to forward, which carries what its response is counted by.
func (p *DynamoDBProxy) receive(r *http.Request) *http.Request {
	op := operation(r)
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		body = nil // forwarded empty: the emulator answers what it makes of that
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	classify := p.classify
	p.mu.Unlock()
	class := ""
	if classify != nil {
		class = classify(op, body)
	}
	p.mu.Lock()
	p.calls[op]++
	p.classCalls[op+"/"+class]++
	p.signers.Add(r.Header)
	p.mu.Unlock()
	return r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{op: op, class: class, body: body}))
}

// count adds the capacity a response reports as consumed: one figure, or
// one per table (BatchGetItem, BatchWriteItem). A conditional write whose
// condition failed consumed units too, which an error reports nothing of
// (neither DynamoDB's nor dynalite's): they are reckoned from the item's
// size (failedWriteUnits).
func (p *DynamoDBProxy) count(resp *http.Response) error {
	info, _ := resp.Request.Context().Value(requestInfoKey{}).(*requestInfo)
	if info == nil {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var units float64
	switch {
	case resp.StatusCode == http.StatusOK:
		units = consumedUnits(body)
	case conditionFailed(body) && isItemWrite(info.op):
		units = p.failedWriteUnits(resp.Request.Context(), info)
	}
	if units == 0 {
		return nil
	}
	p.mu.Lock()
	p.units[info.op] += units
	p.classUnits[info.op+"/"+info.class] += units
	p.mu.Unlock()
	return nil
}

// consumedUnits is the ConsumedCapacity of a response, summed over its
// tables when it is a list; 0 when the request did not ask for it.
func consumedUnits(body []byte) float64 {
	var out struct{ ConsumedCapacity json.RawMessage }
	if json.Unmarshal(body, &out) != nil || len(out.ConsumedCapacity) == 0 {
		return 0
	}
	type capacity struct{ CapacityUnits float64 }
	if out.ConsumedCapacity[0] == '[' {
		var list []capacity
		json.Unmarshal(out.ConsumedCapacity, &list)
		sum := 0.0
		for _, c := range list {
			sum += c.CapacityUnits
		}
		return sum
	}
	var one capacity
	json.Unmarshal(out.ConsumedCapacity, &one)
	return one.CapacityUnits
}

// conditionFailed reports an error body of ConditionalCheckFailedException.
func conditionFailed(body []byte) bool {
	var e struct {
		Type string `json:"__type"`
	}
	return json.Unmarshal(body, &e) == nil && strings.HasSuffix(e.Type, "#ConditionalCheckFailedException")
}

func isItemWrite(op string) bool {
	return op == "PutItem" || op == "UpdateItem" || op == "DeleteItem"
}

// failedWriteUnits reckons what a conditional write whose condition failed
// consumed, had it asked for its consumed capacity: DynamoDB charges it
// the write units of the item as it stands (a PutItem, of the larger of
// that and the item it would have put), at least one. The item is read
// straight from the emulator, uncounted, just after the failure: a write
// in between makes the figure that write's item's, which is what a
// benchmark's steady state cannot tell apart.
func (p *DynamoDBProxy) failedWriteUnits(ctx context.Context, info *requestInfo) float64 {
	var req struct {
		TableName              string
		Key, Item              json.RawMessage
		ReturnConsumedCapacity string
	}
	if json.Unmarshal(info.body, &req) != nil || req.ReturnConsumedCapacity == "" || req.ReturnConsumedCapacity == "NONE" {
		return 0 // as a success that did not ask would count
	}
	size := 0
	var key map[string]types.AttributeValue
	if req.Item != nil {
		item, err := wireItem(req.Item)
		if err != nil {
			return ddbcost.WriteUnits(0)
		}
		size = ddbcost.ItemSize(item)
		key = p.keyOf(ctx, req.TableName, item)
	} else if k, err := wireItem(req.Key); err == nil {
		key = k
	}
	if key != nil {
		out, err := p.direct.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(req.TableName), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			size = max(size, ddbcost.ItemSize(out.Item))
		}
	}
	return ddbcost.WriteUnits(size)
}

// keyOf is the key attributes of item in table, from the table's key
// schema (asked once per table); nil if the table cannot be described.
func (p *DynamoDBProxy) keyOf(ctx context.Context, table string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	p.mu.Lock()
	names, ok := p.keys[table]
	p.mu.Unlock()
	if !ok {
		out, err := p.direct.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return nil
		}
		for _, k := range out.Table.KeySchema {
			names = append(names, aws.ToString(k.AttributeName))
		}
		p.mu.Lock()
		p.keys[table] = names
		p.mu.Unlock()
	}
	key := make(map[string]types.AttributeValue, len(names))
	for _, n := range names {
		key[n] = item[n]
	}
	return key
}

// Rates is what a proxy counted between two readings of Calls or
// CallsByClass, a second: calls and units by the readings' key ("op" or
// "op/class"), and the units of every key summed as write units or read
// units by their operation (ddbcost.IsWrite), what prices them.
type Rates struct {
	Calls, Units          map[string]float64
	AllCalls              float64
	WriteUnits, ReadUnits float64
}

// RatesBetween is the rates of the calls and units counted from the first
// reading (c0, u0) to the second (c1, u1), taken d apart. Keys without a
// call in between are left out.
func RatesBetween(c0 map[string]int64, u0 map[string]float64, c1 map[string]int64, u1 map[string]float64, d time.Duration) Rates {
	secs := d.Seconds()
	r := Rates{Calls: map[string]float64{}, Units: map[string]float64{}}
	for k, n := range c1 {
		if n == c0[k] {
			continue
		}
		op, _, _ := strings.Cut(k, "/")
		r.Calls[k] = float64(n-c0[k]) / secs
		r.Units[k] = (u1[k] - u0[k]) / secs
		r.AllCalls += r.Calls[k]
		if ddbcost.IsWrite(op) {
			r.WriteUnits += r.Units[k]
		} else {
			r.ReadUnits += r.Units[k]
		}
	}
	return r
}
