package input

import (
	"fmt"
	"maps"
	"sync"

	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"gopkg.in/yaml.v3"
)

// checkMethod is the Bloblang method the input's lint rule calls: it runs
// run's own parse of the config (parseConfig) on the config being linted,
// so that lint refuses what run refuses, with the same message, and no
// config passes one and fails the other. What only the running binary can
// see (a checkpoint directory that cannot be written, a lease table that
// does not answer) is run's alone.
const checkMethod = "aws_kinesis_streams_config_errors"

// fieldCheckMethod is the Bloblang method a field's lint rule calls with
// the field's name, for the fields whose form run checks with a function
// of its own: that function, so that the field's lint (at its line) refuses
// exactly what run refuses. (Rules written in Bloblang once differed from
// run on whitespace and upper-case schemes; the fuzz target found them.)
const fieldCheckMethod = "aws_kinesis_streams_field_errors"

// fieldChecks are the checks of fieldCheckMethod, by field, each as run's
// parse makes it (the same function, the same message).
var fieldChecks = map[string]func(string) error{
	fRegion:   checkAt(fRegion, awsclient.CheckRegion),
	fEndpoint: checkAt(fEndpoint, awsclient.CheckEndpoint),
	fCheckpoint + "." + fDynamo + "." + fDynamoRegion:   checkAt(fCheckpoint+"."+fDynamo+"."+fDynamoRegion, awsclient.CheckRegion),
	fCheckpoint + "." + fDynamo + "." + fDynamoEndpoint: checkAt(fCheckpoint+"."+fDynamo+"."+fDynamoEndpoint, awsclient.CheckEndpoint),
	fMemoryLimit: func(v string) error {
		if _, err := parseBytes(v); err != nil {
			return fieldError(fMemoryLimit, v, "%v", err)
		}
		return nil
	},
}

// checkAt words a check of an optional field as run's parse does: an
// empty value is not checked.
func checkAt(field string, check func(string) error) func(string) error {
	return func(v string) error {
		if v == "" {
			return nil
		}
		if err := check(v); err != nil {
			return fmt.Errorf("field %s: %w", field, err)
		}
		return nil
	}
}

var registerCheck sync.Once

// registerCheckMethod registers checkMethod in the global Bloblang
// environment, where lint rules find their methods. A pure method: lint
// runs it on configs only.
func registerCheckMethod() {
	registerCheck.Do(func() {
		spec := bloblang.NewPluginSpec().
			Category("Object & Array Manipulation").
			Description("Returns the errors the " + Name + " input's run refuses its config with (an empty array for none). The input's lint rule calls it on the input's config, so that lint and run check a config with the same code.")
		bloblang.MustRegisterMethodV2(checkMethod, spec, func(*bloblang.ParsedParams) (bloblang.Method, error) {
			return func(v any) (any, error) { return configErrors(v), nil }, nil
		})
		fieldSpec := bloblang.NewPluginSpec().
			Category("Object & Array Manipulation").
			Description("Returns the errors the " + Name + " input's run refuses a value of one of its fields with (an empty array for none): the field's lint rule calls it.").
			Param(bloblang.NewStringParam("field").Description("The field's path in the input's config."))
		bloblang.MustRegisterMethodV2(fieldCheckMethod, fieldSpec, func(args *bloblang.ParsedParams) (bloblang.Method, error) {
			field, err := args.GetString("field")
			if err != nil {
				return nil, err
			}
			check, ok := fieldChecks[field]
			if !ok {
				return nil, fmt.Errorf("%s: no check of field %q", fieldCheckMethod, field)
			}
			return func(v any) (any, error) {
				s, ok := v.(string)
				if !ok {
					return []any{}, nil // not a string: the schema's lint, or run's, says so
				}
				if err := check(s); err != nil {
					return []any{err.Error()}, nil
				}
				return []any{}, nil
			}, nil
		})
	})
}

// configErrors is what run's parse refuses a config with, the config as
// lint sees it (a YAML object decoded): one error, the first, as run
// would report it. The tls section is left to the schema's lint: parsing
// it reads its certificate files, which may exist only where the config
// runs.
func configErrors(v any) []any {
	obj, ok := v.(map[string]any)
	if !ok {
		return []any{} // not an object: the schema's lint says so
	}
	if _, has := obj["tls"]; has {
		obj = maps.Clone(obj)
		delete(obj, "tls")
	}
	doc, err := yaml.Marshal(obj)
	if err != nil {
		return []any{err.Error()}
	}
	pc, err := Spec().ParseYAML(string(doc), nil)
	if err != nil {
		return []any{err.Error()}
	}
	if _, err := parseConfig(pc); err != nil {
		return []any{err.Error()}
	}
	return []any{}
}
