package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestManifestsDecodeStrictly: every document of every manifest decodes
// into its Kubernetes API type with no unknown field, and the pods are
// probed on /ready, scraped on /metrics and run as a non-root user.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifest: %v", err)
	}
	for _, f := range files {
		kinds := map[string]int{}
		for i, doc := range documents(t, f) {
			var head struct{ Kind string }
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			kinds[head.Kind]++
			var obj any
			var pod *corev1.PodTemplateSpec
			switch head.Kind {
			case "ConfigMap":
				obj = &corev1.ConfigMap{}
			case "Service":
				obj = &corev1.Service{}
			case "ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "Deployment":
				d := &appsv1.Deployment{}
				obj, pod = d, &d.Spec.Template
			case "StatefulSet":
				s := &appsv1.StatefulSet{}
				obj, pod = s, &s.Spec.Template
			default:
				t.Fatalf("%s document %d: kind %q has no decoder here", f, i, head.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, head.Kind, err)
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok && !strings.Contains(cm.Data["pipeline.yaml"], "aws_kinesis_streams") {
				t.Errorf("%s: ConfigMap %s has no pipeline.yaml reading aws_kinesis_streams", f, cm.Name)
			}
			if pod != nil {
				checkPod(t, f, pod)
			}
		}
		for _, k := range []string{"ConfigMap", "Service", "ServiceAccount"} {
			if kinds[k] != 1 {
				t.Errorf("%s has %d %s documents, want 1", f, kinds[k], k)
			}
		}
		if kinds["Deployment"]+kinds["StatefulSet"] != 1 {
			t.Errorf("%s has %d workloads, want 1", f, kinds["Deployment"]+kinds["StatefulSet"])
		}
	}
}

// documents are the YAML documents of a manifest file.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(data, []byte("\n---\n"))
}

func checkPod(t *testing.T, f string, pod *corev1.PodTemplateSpec) {
	t.Helper()
	if pod.Annotations["prometheus.io/path"] != "/metrics" || pod.Annotations["prometheus.io/port"] != "4195" {
		t.Errorf("%s: the pod is not scraped on :4195/metrics: %v", f, pod.Annotations)
	}
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: the pod does not require a non-root user", f)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", f, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
		t.Errorf("%s: the container's readiness probe is not GET /ready", f)
	}
	if len(c.Args) != 2 || c.Args[0] != "run" {
		t.Errorf("%s: the container's args are %v, want run <config>", f, c.Args)
	}
}
