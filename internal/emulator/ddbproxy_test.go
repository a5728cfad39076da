package emulator

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TestDynamoDBProxyUnreachable: while unreachable the proxy answers no call,
// so the client's error is a network error, not an AWS error; afterwards
// calls go through again.
func TestDynamoDBProxyUnreachable(t *testing.T) {
	t.Parallel()
	d := Dynalite(t)
	p := NewDynamoDBProxy(t, d)
	c := (&DynamoDB{Endpoint: p.Endpoint, Region: d.Region}).Client(func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{}
		o.RetryMaxAttempts = 1
	})
	ctx := t.Context()
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	const outage = 2 * time.Second
	p.Unreachable(outage)
	until := time.Now().Add(outage)
	_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
	var api smithy.APIError
	if err == nil || errors.As(err, &api) {
		t.Fatalf("a call while unreachable: got %v, want a network error without an AWS error code", err)
	}
	t.Logf("while unreachable: %v", err)
	time.Sleep(time.Until(until)) // the outage lasts its whole duration
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	if calls, _ := p.Calls(); calls["ListTables"] != 3 {
		t.Fatalf("%d ListTables calls counted, want 3", calls["ListTables"])
	}
}

// TestDynamoDBProxyCountsByClass: calls and units are counted by the class
// the classifier gives, a BatchGetItem's units (a list, one per table) and
// a Scan's as the emulator reports them, and a conditional write whose
// condition failed, which reports none, by the size of the item it hit.
func TestDynamoDBProxyCountsByClass(t *testing.T) {
	t.Parallel()
	d := Dynalite(t)
	p := NewDynamoDBProxy(t, d)
	p.Classify(func(op string, body []byte) string {
		switch {
		case op == "Scan":
			return "scan"
		case bytes.Contains(body, []byte(`"a-`)):
			return "a"
		case bytes.Contains(body, []byte(`"b-`)):
			return "b"
		}
		return ""
	})
	c := (&DynamoDB{Endpoint: p.Endpoint, Region: d.Region}).Client(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{} })
	ctx := t.Context()
	table := aws.String("items")
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: table}, 30*time.Second, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }); err != nil {
		t.Fatal(err)
	}
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: k}}
	}
	total := types.ReturnConsumedCapacityTotal
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key("a-1"), ReturnConsumedCapacity: total})) // 1 unit
	big := key("b-1")
	big["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", 1500)}
	must(c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: big, ReturnConsumedCapacity: total}))                                       // 2 units
	must(c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key("a-1"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})) // 1 unit
	batch, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
		RequestItems:           map[string]types.KeysAndAttributes{"items": {Keys: []map[string]types.AttributeValue{key("a-1"), key("a-2")}}},
		ReturnConsumedCapacity: total,
	})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: table, ReturnConsumedCapacity: total})
	if err != nil {
		t.Fatal(err)
	}
	notThere := aws.String("attribute_not_exists(k)")
	var failed *types.ConditionalCheckFailedException
	// The existing item is 2 units' worth; the update would have made it 3.
	_, err = c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: table, Key: key("b-1"), ConditionExpression: notThere, ReturnConsumedCapacity: total,
		UpdateExpression:          aws.String("SET more = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: strings.Repeat("y", 1000)}},
	})
	if !errors.As(err, &failed) {
		t.Fatalf("conditional UpdateItem: %v, want its condition to fail", err)
	}
	// The existing item is small, the one put would have been 2 units.
	big["k"] = &types.AttributeValueMemberS{Value: "a-1"}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: big, ConditionExpression: notThere, ReturnConsumedCapacity: total}); !errors.As(err, &failed) {
		t.Fatalf("conditional PutItem: %v, want its condition to fail", err)
	}
	if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: key("b-1"), ConditionExpression: notThere, ReturnConsumedCapacity: total}); !errors.As(err, &failed) {
		t.Fatalf("conditional DeleteItem: %v, want its condition to fail", err)
	}

	sum := func(cs []types.ConsumedCapacity) float64 {
		s := 0.0
		for _, c := range cs {
			s += aws.ToFloat64(c.CapacityUnits)
		}
		return s
	}
	batchUnits, scanUnits := sum(batch.ConsumedCapacity), aws.ToFloat64(scan.ConsumedCapacity.CapacityUnits)
	if batchUnits == 0 || scanUnits == 0 {
		t.Fatalf("dynalite reported %v units for the BatchGetItem and %v for the Scan, want some", batchUnits, scanUnits)
	}
	calls, units := p.CallsByClass()
	for k, want := range map[string]int64{"PutItem/a": 2, "PutItem/b": 1, "GetItem/a": 1, "BatchGetItem/a": 1, "Scan/scan": 1, "UpdateItem/b": 1, "DeleteItem/b": 1, "CreateTable/": 1} {
		if calls[k] != want {
			t.Errorf("%d calls of %s, want %d (all: %v)", calls[k], k, want, calls)
		}
	}
	for k, want := range map[string]float64{"PutItem/a": 1 + 2, "PutItem/b": 2, "GetItem/a": 1, "BatchGetItem/a": batchUnits, "Scan/scan": scanUnits, "UpdateItem/b": 2, "DeleteItem/b": 2} {
		if units[k] != want {
			t.Errorf("%v units of %s, want %v (all: %v)", units[k], k, want, units)
		}
	}
	byOp, opUnits := p.Calls()
	if byOp["PutItem"] != 3 || opUnits["PutItem"] != 5 {
		t.Errorf("PutItem: %d calls and %v units by operation, want 3 and 5", byOp["PutItem"], opUnits["PutItem"])
	}
}

func TestRatesBetween(t *testing.T) {
	c0 := map[string]int64{"UpdateItem/shard": 10, "Scan/scan": 4, "DescribeTable/": 1}
	u0 := map[string]float64{"UpdateItem/shard": 10, "Scan/scan": 8}
	c1 := map[string]int64{"UpdateItem/shard": 30, "Scan/scan": 6, "DescribeTable/": 1, "GetItem/worker": 2}
	u1 := map[string]float64{"UpdateItem/shard": 30, "Scan/scan": 12, "GetItem/worker": 1}
	r := RatesBetween(c0, u0, c1, u1, 2*time.Second)
	want := Rates{
		Calls:    map[string]float64{"UpdateItem/shard": 10, "Scan/scan": 1, "GetItem/worker": 1},
		Units:    map[string]float64{"UpdateItem/shard": 10, "Scan/scan": 2, "GetItem/worker": 0.5},
		AllCalls: 12, WriteUnits: 10, ReadUnits: 2.5,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("RatesBetween = %+v, want %+v", r, want)
	}
}
