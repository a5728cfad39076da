package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestDynaliteTable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	d := Dynalite(t, WithTableDelay(100*time.Millisecond))
	t.Logf("dynalite ready at %s in %v", d.Endpoint, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := d.Client()

	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("leases"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	var desc *types.TableDescription
	waitFor(ctx, t, "table ACTIVE", func() (bool, error) {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")})
		if err != nil {
			return false, err
		}
		desc = out.Table
		return desc.TableStatus == types.TableStatusActive, nil
	})
	if len(desc.KeySchema) != 1 || aws.ToString(desc.KeySchema[0].AttributeName) != "leaseKey" {
		t.Fatalf("key schema %+v", desc.KeySchema)
	}

	// A conditional write, as lease tables use them: the second one loses.
	put := &dynamodb.PutItemInput{
		TableName:           aws.String("leases"),
		Item:                map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "shardId-000000000000"}},
		ConditionExpression: aws.String("attribute_not_exists(leaseKey)"),
	}
	if _, err := c.PutItem(ctx, put); err != nil {
		t.Fatalf("first conditional PutItem: %v", err)
	}
	_, err = c.PutItem(ctx, put)
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		t.Fatalf("second conditional PutItem: got %v, want ConditionalCheckFailedException", err)
	}
}

// TestDynaliteSurvivesAnAbandonedRequest: a client that closes its connection
// half way through a request body (a canceled context, a killed instance)
// leaves dynalite answering; unguarded, dynalite throws the request's
// "aborted" error and exits.
func TestDynaliteSurvivesAnAbandonedRequest(t *testing.T) {
	t.Parallel()
	d := Dynalite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := net.Dial("tcp", strings.TrimPrefix(d.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"+
		"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Limit\":", conn.RemoteAddr())
	// Half-closed, the request can never end: dynalite sees it aborted, and
	// closes its side once it has handled that.
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("waiting for dynalite to close the abandoned request: %v", err)
	}
	if _, err := d.Client().ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables after an abandoned request: %v", err)
	}
}
