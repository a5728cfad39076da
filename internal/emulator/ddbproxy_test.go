package emulator

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
