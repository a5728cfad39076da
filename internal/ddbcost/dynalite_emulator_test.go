package ddbcost_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/ddbcost"
	"github.com/benthos-kinesis/benthos-kinesis/internal/emulator"
)

// TestItemSizeAgreesWithDynalite: the size ItemSize gives an item is the
// one dynalite charges for it, to the byte. Capacity comes in whole units,
// so each item is padded to exactly a unit's bytes by ItemSize (1 KB for a
// write, 4 KB for a read) and then to a byte more: a size off by one either
// way moves one of the two to the wrong number of units. Dynalite counts a
// string's UTF-16 code units where DynamoDB counts UTF-8 bytes, so the
// strings are ASCII.
func TestItemSizeAgreesWithDynalite(t *testing.T) {
	t.Parallel()
	d := emulator.Dynalite(t)
	c := d.Client()
	ctx := t.Context()
	const table = "sizes"
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond }); err != nil {
		t.Fatal(err)
	}

	type av = types.AttributeValue
	items := map[string]map[string]av{
		"strings": {"owner": &types.AttributeValueMemberS{Value: "i00"}, "checkpoint": &types.AttributeValueMemberS{Value: "49590338271490256608559692538361571095921575989136588898"}},
		"numbers": {
			"a": &types.AttributeValueMemberN{Value: "0"}, "b": &types.AttributeValueMemberN{Value: "-1"},
			"c": &types.AttributeValueMemberN{Value: "1.2"}, "d": &types.AttributeValueMemberN{Value: "12.50"},
			"e": &types.AttributeValueMemberN{Value: "100"}, "f": &types.AttributeValueMemberN{Value: "0.001"},
			"g": &types.AttributeValueMemberN{Value: "-123.456e5"}, "h": &types.AttributeValueMemberN{Value: "1E+3"},
			"i": &types.AttributeValueMemberN{Value: "1234567890123456789012345678901234567"},
			"j": &types.AttributeValueMemberN{Value: "281474976710656"}, // a worker's counter, 2^48
		},
		"scalars": {
			"bin":  &types.AttributeValueMemberB{Value: []byte("twelve bytes")},
			"yes":  &types.AttributeValueMemberBOOL{Value: true},
			"null": &types.AttributeValueMemberNULL{Value: true},
		},
		"documents": {
			"held": &types.AttributeValueMemberL{Value: []av{&types.AttributeValueMemberS{Value: "shardId-000000000001"}, &types.AttributeValueMemberN{Value: "42"}}},
			"loads": &types.AttributeValueMemberM{Value: map[string]av{
				"shardId-000000000001": &types.AttributeValueMemberN{Value: "1048576.5"},
				"nested":               &types.AttributeValueMemberM{Value: map[string]av{"l": &types.AttributeValueMemberL{}}},
			}},
			"empty": &types.AttributeValueMemberM{Value: map[string]av{}},
		},
		"sets": {
			"parents": &types.AttributeValueMemberSS{Value: []string{"shardId-000000000000", "shardId-000000000001"}},
			"ns":      &types.AttributeValueMemberNS{Value: []string{"1", "-22.5", "300"}},
			"bs":      &types.AttributeValueMemberBS{Value: [][]byte{[]byte("ab"), []byte("cde")}},
		},
	}
	for name, item := range items {
		for _, size := range []int{1024, 1025, 4096, 4097} {
			key := fmt.Sprintf("%s-%d", name, size)
			padded := map[string]av{"leaseKey": &types.AttributeValueMemberS{Value: key}}
			for k, v := range item {
				padded[k] = v
			}
			padded["pad"] = &types.AttributeValueMemberS{}
			padded["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", size-ddbcost.ItemSize(padded))}
			if got := ddbcost.ItemSize(padded); got != size {
				t.Fatalf("%s: padded to %d bytes, want %d", key, got, size)
			}
			put, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: padded, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if got, want := aws.ToFloat64(put.ConsumedCapacity.CapacityUnits), ddbcost.WriteUnits(size); got != want {
				t.Errorf("%s: dynalite charged the PutItem %v write units, ItemSize %d bytes makes %v", key, got, size, want)
			}
			get, err := c.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(table), Key: map[string]av{"leaseKey": &types.AttributeValueMemberS{Value: key}},
				ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if got, want := aws.ToFloat64(get.ConsumedCapacity.CapacityUnits), ddbcost.ReadUnits(size, true); got != want {
				t.Errorf("%s: dynalite charged the GetItem %v read units, ItemSize %d bytes makes %v", key, got, size, want)
			}
		}
	}
}
