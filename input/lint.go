package input

import (
	"maps"
	"sync"

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
