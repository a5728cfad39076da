package emulator

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// wireItem turns an item (or a key) as DynamoDB's JSON protocol writes it,
// {"name": {"S": "v"}, ...}, into the SDK's types: what the proxy reads out
// of a request body to size it or to look its item up.
func wireItem(raw json.RawMessage) (map[string]types.AttributeValue, error) {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return nil, err
	}
	item := make(map[string]types.AttributeValue, len(attrs))
	for name, v := range attrs {
		av, err := wireValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		item[name] = av
	}
	return item, nil
}

// wireValue is one value: an object of one member named by its type.
func wireValue(raw json.RawMessage) (types.AttributeValue, error) {
	var v struct {
		S    *string
		N    *string
		B    []byte // base64 on the wire
		BOOL *bool
		NULL *bool
		L    []json.RawMessage
		M    json.RawMessage
		SS   []string
		NS   []string
		BS   [][]byte
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch {
	case v.S != nil:
		return &types.AttributeValueMemberS{Value: *v.S}, nil
	case v.N != nil:
		return &types.AttributeValueMemberN{Value: *v.N}, nil
	case v.B != nil:
		return &types.AttributeValueMemberB{Value: v.B}, nil
	case v.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *v.BOOL}, nil
	case v.NULL != nil:
		return &types.AttributeValueMemberNULL{Value: *v.NULL}, nil
	case v.L != nil:
		l := make([]types.AttributeValue, len(v.L))
		for i, e := range v.L {
			av, err := wireValue(e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case v.M != nil:
		m, err := wireItem(v.M)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case v.SS != nil:
		return &types.AttributeValueMemberSS{Value: v.SS}, nil
	case v.NS != nil:
		return &types.AttributeValueMemberNS{Value: v.NS}, nil
	case v.BS != nil:
		return &types.AttributeValueMemberBS{Value: v.BS}, nil
	}
	return nil, fmt.Errorf("no value of a known type in %s", raw)
}
