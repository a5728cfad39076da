package input

import (
	"fmt"
	"strings"
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"
)

// Benthos's linter checks that a bool or number field holds a scalar, not
// which one; and it runs a component's lint rules on a value of the
// component's config converted to the spec's types, skipping them when
// that fails. So `strict_order: sure` or `checkpoint.limit: '100'` passes
// lint, run's own check included (configErrors), and run refuses it. The
// checks below are that conversion, done on the YAML of a config file by
// the CLI's lint (see CLIOpt): a value its field's type cannot take is
// refused where it is written.

// typeLint is a value of the input's config that its field's type cannot
// take: where it is in the file, and what is wrong.
type typeLint struct {
	line, column int
	what         string
}

// typedFields are the input's fields of a type other than string, by dot
// path, as its spec says: bool, int or float. (Any scalar converts to a
// string, and a field of objects or arrays that holds a scalar is reported
// by Benthos's own lint.)
var typedFields = sync.OnceValue(func() map[string]string {
	fields := map[string]string{}
	cv, ok := service.GlobalEnvironment().GetInputConfig(Name)
	if !ok {
		return fields
	}
	td, err := cv.TemplateData()
	if err != nil {
		return fields
	}
	for _, f := range td.Fields {
		switch f.Type {
		case "bool", "int", "float":
			if !strings.Contains(f.FullName, "[]") {
				fields[f.FullName] = f.Type
			}
		}
	}
	return fields
})

// typeLints returns the values of every aws_kinesis_streams config in a
// YAML document (at any depth: under a broker, among resources) that their
// field's type cannot take. A plain value that refers to an environment
// variable is left to run, which sees it filled in (a quoted one stays a
// string whatever the variable holds); a document that is no YAML is
// left to Benthos's lint, which says so.
func typeLints(doc []byte) []typeLint {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil
	}
	var lints []typeLint
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == Name && v.Kind == yaml.MappingNode {
					lints = append(lints, configTypeLints(v)...)
					continue
				}
				walk(v)
			}
		}
	}
	walk(&root)
	return lints
}

// configTypeLints checks the typed fields of one config of the input.
func configTypeLints(conf *yaml.Node) []typeLint {
	var lints []typeLint
	for path, typ := range typedFields() {
		n := lookup(conf, strings.Split(path, "."))
		if n == nil || n.Kind != yaml.ScalarNode || (n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) == 0 && strings.Contains(n.Value, "${")) {
			continue
		}
		var err error
		switch typ {
		case "bool":
			var b bool
			err = n.Decode(&b)
		case "int":
			var i int
			err = n.Decode(&i)
		case "float":
			var f float64
			err = n.Decode(&f)
		}
		if err != nil {
			lints = append(lints, typeLint{line: n.Line, column: n.Column,
				what: fmt.Sprintf("field %s: %s is %s; expected %s", path, quoteScalar(n), yamlKind(n), article(typ))})
		}
	}
	return lints
}

// lookup returns the value at path in a mapping, or nil.
func lookup(n *yaml.Node, path []string) *yaml.Node {
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// quoteScalar writes a scalar as the file has it.
func quoteScalar(n *yaml.Node) string {
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
		return fmt.Sprintf("%q", n.Value)
	}
	return n.Value
}

// yamlKind names what YAML made of a scalar.
func yamlKind(n *yaml.Node) string {
	switch n.ShortTag() {
	case "!!str":
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
			return "a quoted string"
		}
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number with a fraction"
	case "!!bool":
		return "a bool"
	case "!!null":
		return "null"
	}
	return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
}

func article(typ string) string {
	switch typ {
	case "bool":
		return "a bool (true or false)"
	case "int":
		return "an integer"
	}
	return "a number"
}
