package input

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/redpanda-data/benthos/v4/public/service"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated documentation of the input")

// docsPath is the input's documentation, generated from Spec.
const docsPath = "aws_kinesis_streams.md"

// TestDocsAreGenerated keeps the documentation generated from the spec: it
// fails when the committed file differs from what the spec renders. Rewrite
// it with `make docs` (go test ./input -run TestDocsAreGenerated -update-docs).
func TestDocsAreGenerated(t *testing.T) {
	rendered := renderDocs(t)
	if *updateDocs {
		if err := os.WriteFile(docsPath, rendered, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("%v: generate it with make docs", err)
	}
	if !bytes.Equal(committed, rendered) {
		t.Fatalf("%s is stale: regenerate it with make docs", docsPath)
	}
}

func renderDocs(t *testing.T) []byte {
	t.Helper()
	view, ok := service.GlobalEnvironment().GetInputConfig(Name)
	if !ok {
		t.Fatalf("input %s is not registered", Name)
	}
	data, err := view.TemplateData()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, data); err != nil {
		t.Fatal(err)
	}
	// Benthos' own field descriptions (batching) carry Antora cross
	// references, which Markdown does not resolve: they become links to the
	// Benthos documentation.
	out := xrefRE.ReplaceAll(buf.Bytes(), []byte("[$3](https://docs.redpanda.com/redpanda-connect/$1/$2/)"))
	if bytes.Contains(out, []byte("xref:")) {
		t.Fatalf("the docs keep an unresolved xref: link:\n%s", out)
	}
	return out
}

// xrefRE matches an Antora cross reference: xref:MODULE:PATH.adoc[TEXT].
var xrefRE = regexp.MustCompile(`xref:([a-z_-]+):([^\[\s]+)\.adoc\[([^\]]+)\]`)

var docsTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{
	"trim": strings.TrimSpace,
	"code": func(s string) string { return "`" + s + "`" },
}).Parse(`<!-- Generated from the input's config spec (input/spec.go) by make docs. Do not edit. -->

# {{.Name}}

{{.Summary}}

## Common configuration

` + "```yaml" + `
{{trim .CommonConfigYAML}}
` + "```" + `

## Full configuration

` + "```yaml" + `
{{trim .AdvancedConfigYAML}}
` + "```" + `
{{trim .Description}}
{{if .Examples}}
## Examples
{{range .Examples}}
### {{.Title}}

{{.Summary}}

` + "```yaml" + `
{{trim .Config}}
` + "```" + `
{{end}}{{end}}
## Fields
{{range .Fields}}
### {{code .FullName}}

{{trim .Description}}
{{if .IsSecret}}
This field holds a secret: it is never printed by echo, and it is best set from an environment variable.
{{end}}
Type: {{code .Type}}{{if .DefaultMarshalled}}  
Default: {{code .DefaultMarshalled}}{{end}}
{{if .AnnotatedOptions}}
| Option | Summary |
|---|---|
{{range .AnnotatedOptions}}| {{code (index . 0)}} | {{index . 1}} |
{{end}}{{else if .Options}}
Options: {{range $i, $o := .Options}}{{if $i}}, {{end}}{{code $o}}{{end}}.
{{end}}{{if .ExamplesMarshalled}}
` + "```yaml" + `
# Examples
{{range .ExamplesMarshalled}}
{{trim .}}
{{end}}` + "```" + `
{{end}}{{end}}`))
