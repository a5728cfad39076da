package recordjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// sdkDecode decodes a GetRecords response body as the SDK does.
func sdkDecode(t testing.TB, body []byte) *kinesis.GetRecordsOutput {
	t.Helper()
	p := awsjson.New11(schemas.Kinesis_20131202)
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}}
	out := &kinesis.GetRecordsOutput{}
	op := smithy.NewOperationSchema(schemas.GetRecords, schemas.GetRecordsInput, schemas.GetRecordsOutput)
	if err := p.DeserializeResponse(context.Background(), op, kinesis.TypeRegistry, resp, out); err != nil {
		t.Fatalf("the SDK cannot decode the body: %v\n%s", err, body)
	}
	return out
}

// randomBody is a GetRecords response as Kinesis would send it, with what
// JSON allows on top: escapes in keys' values, unknown fields, nulls,
// fractional and integral times, spacing.
func randomBody(r *rand.Rand, n int, childShards bool) []byte {
	var recs []map[string]any
	for i := range n {
		data := make([]byte, r.IntN(300))
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		rec := map[string]any{
			"Data":           data, // encoding/json writes []byte as standard base64
			"SequenceNumber": fmt.Sprintf("4963%040d", r.Int64()),
			"PartitionKey":   []string{"key", "k\"q\\uote", "<&>", "ünïcødé", "tab\there"}[r.IntN(5)] + fmt.Sprint(i),
		}
		switch r.IntN(4) {
		case 0:
			rec["ApproximateArrivalTimestamp"] = 1.764737123456e9
		case 1:
			rec["ApproximateArrivalTimestamp"] = json.Number("1764737123")
		case 2:
			rec["ApproximateArrivalTimestamp"] = json.Number("1764737123.999")
		}
		if r.IntN(3) == 0 {
			rec["EncryptionType"] = []string{"NONE", "KMS", "FUTURE"}[r.IntN(3)]
		}
		if r.IntN(5) == 0 {
			rec["SomethingNew"] = map[string]any{"a": []any{1, "x]}", nil, true}}
		}
		recs = append(recs, rec)
	}
	doc := map[string]any{"Records": recs, "MillisBehindLatest": r.Int64N(1e9), "NextShardIterator": "AAAA/+==" + fmt.Sprint(r.Int())}
	if childShards {
		doc["NextShardIterator"] = nil
		doc["ChildShards"] = []map[string]any{{
			"ShardId": "shardId-000000000002", "ParentShards": []string{"shardId-000000000000"},
			"HashKeyRange": map[string]string{"StartingHashKey": "0", "EndingHashKey": "170141183460469231731687303715884105727"},
		}}
	}
	body, err := json.MarshalIndent(doc, "", strings.Repeat(" ", r.IntN(3)))
	if err != nil {
		panic(err)
	}
	return body
}

// TestDecodeAsTheSDK: every field of random responses decodes as the SDK
// decodes it.
func TestDecodeAsTheSDK(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		body := randomBody(r, r.IntN(50), i%10 == 0)
		want := sdkDecode(t, body)
		got, err := Decode(body)
		if err != nil {
			t.Fatalf("body %d: %v\n%s", i, err, body)
		}
		if len(got.Records) != len(want.Records) {
			t.Fatalf("body %d: %d records, the SDK %d", i, len(got.Records), len(want.Records))
		}
		for j := range want.Records {
			g, w := got.Records[j], want.Records[j]
			if len(g.Data) == 0 && len(w.Data) == 0 {
				g.Data, w.Data = nil, nil
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("body %d record %d:\n got %+v\nwant %+v", i, j, g, w)
			}
		}
		if !reflect.DeepEqual(got.ChildShards, want.ChildShards) && !(len(got.ChildShards) == 0 && len(want.ChildShards) == 0) {
			t.Fatalf("body %d: child shards %+v, the SDK %+v", i, got.ChildShards, want.ChildShards)
		}
		if !reflect.DeepEqual(got.MillisBehindLatest, want.MillisBehindLatest) || !reflect.DeepEqual(got.NextShardIterator, want.NextShardIterator) {
			t.Fatalf("body %d: %v %v, the SDK %v %v", i, got.MillisBehindLatest, got.NextShardIterator, want.MillisBehindLatest, want.NextShardIterator)
		}
	}
}

// TestDecodeOwnsItsMemory: the result does not alias the document, which
// the caller reuses.
func TestDecodeOwnsItsMemory(t *testing.T) {
	body := []byte(`{"Records":[{"Data":"aGVsbG8=","PartitionKey":"p\u006b","SequenceNumber":"1"}],"MillisBehindLatest":0,"NextShardIterator":"it","ContinuationSequenceNumber":"2","ChildShards":[{"ShardId":"s1","ParentShards":["s0"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]}`)
	got, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	r := got.Records[0]
	if string(r.Data) != "hello" || *r.PartitionKey != "pk" || *r.SequenceNumber != "1" || *got.NextShardIterator != "it" || *got.ContinuationSequenceNumber != "2" {
		t.Fatalf("the result changed with the document: %q %q %q %q %q", r.Data, *r.PartitionKey, *r.SequenceNumber, *got.NextShardIterator, *got.ContinuationSequenceNumber)
	}
	if c := got.ChildShards; len(c) != 1 || *c[0].ShardId != "s1" || c[0].ParentShards[0] != "s0" || *c[0].HashKeyRange.EndingHashKey != "9" {
		t.Fatalf("the child shards changed with the document: %+v", c)
	}
	if cap(r.Data) != len(r.Data) {
		t.Fatalf("a record's data has room to grow into the next one's (cap %d, len %d)", cap(r.Data), len(r.Data))
	}
}

// TestDecodeErrors: a malformed document is an error naming where, never
// a partial result.
func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{``, "unexpected end of JSON at byte 0"},
		{`{"Records":[{"Data":"aGVsbG8="`, "record 0: unexpected end"},
		{`{"Records":[{"Data":"!!!!","SequenceNumber":"1"}]}`, "record 0: Data is not base64"},
		{`{"Records":[{"Data":"aGVsbG8=","ApproximateArrivalTimestamp":"x"}]}`, "record 0: malformed JSON"},
		{`{"Records":[],"MillisBehindLatest":1.5}`, "MillisBehindLatest"},
		{`{"Records":[]} x`, "expected the end of the document"},
		{`{"ChildShards":[{"ShardId":7}]}`, "ChildShards"},
	} {
		_, err := Decode([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q): %v, want an error saying %q", c.body, err, c.want)
		}
	}
}

// BenchmarkDecode compares Decode with the SDK's decoding of a response of
// 10,000 records of 200 bytes (go test -bench . ./internal/recordjson).
func BenchmarkDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var recs []map[string]any
	for i := range 10000 {
		data := make([]byte, 200)
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		recs = append(recs, map[string]any{"Data": data, "SequenceNumber": fmt.Sprintf("4963%052d", i), "PartitionKey": fmt.Sprint("key-", i%100), "ApproximateArrivalTimestamp": 1.764737123456e9})
	}
	body, _ := json.Marshal(map[string]any{"Records": recs, "MillisBehindLatest": 0, "NextShardIterator": "AAAA"})
	b.Run("recordjson", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := Decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			sdkDecode(b, body)
		}
	})
}
