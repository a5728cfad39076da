package deploy

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"
)

const (
	kedaFile = "autoscaling/keda.yaml"
	hpaFile  = "autoscaling/hpa.yaml"
	// scaledFile holds the Deployment the autoscalers scale.
	scaledFile = "many-instances.yaml"
	// minCooldown is the least scale-down stabilization accepted: a lease
	// moves at each scale-down, and lag springs back when too few remain.
	minCooldown = 300
)

// TestKEDAScaledObject: keda.yaml decodes strictly into KEDA's ScaledObject
// schema; it scales the Deployment of many-instances.yaml, never to zero,
// with a scale-down cooldown, on a prometheus trigger whose query names
// only metrics the binary exports (the main module's
// TestDashboardMetricsExported scrapes the binary for them).
func TestKEDAScaledObject(t *testing.T) {
	d := scaledDeployment(t)
	var so scaledObject
	decodeOne(t, kedaFile, &so)
	if so.APIVersion != "keda.sh/v1alpha1" || so.Kind != "ScaledObject" {
		t.Fatalf("%s is %s %s, want keda.sh/v1alpha1 ScaledObject", kedaFile, so.APIVersion, so.Kind)
	}
	ref := so.Spec.ScaleTargetRef
	if ref == nil {
		t.Fatalf("%s has no spec.scaleTargetRef", kedaFile)
	}
	// KEDA's defaults: apps/v1 Deployment, 0 to 100 replicas.
	checkTarget(t, kedaFile, so.Namespace, cmp.Or(ref.APIVersion, "apps/v1"), cmp.Or(ref.Kind, "Deployment"), ref.Name, d)
	checkReplicas(t, kedaFile, deref(so.Spec.MinReplicaCount, 0), deref(so.Spec.MaxReplicaCount, 100), d)
	var behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	if a := so.Spec.Advanced; a != nil && a.HorizontalPodAutoscalerConfig != nil {
		behavior = a.HorizontalPodAutoscalerConfig.Behavior
	}
	checkCooldown(t, kedaFile, behavior)

	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("%s has %d triggers, want 1", kedaFile, len(so.Spec.Triggers))
	}
	tr := so.Spec.Triggers[0]
	if tr.Type != "prometheus" {
		t.Fatalf("%s: trigger of type %q, want prometheus", kedaFile, tr.Type)
	}
	for k := range tr.Metadata {
		if !prometheusTriggerKeys[k] {
			t.Errorf("%s: the prometheus trigger has metadata %q, which KEDA's prometheus scaler does not read", kedaFile, k)
		}
	}
	for _, k := range []string{"serverAddress", "query", "threshold"} {
		if tr.Metadata[k] == "" {
			t.Errorf("%s: the prometheus trigger has no %s", kedaFile, k)
		}
	}
	if v, err := strconv.ParseFloat(tr.Metadata["threshold"], 64); err != nil || v <= 0 {
		t.Errorf("%s: threshold %q is not a positive number", kedaFile, tr.Metadata["threshold"])
	}
	if tr.MetricType != autoscalingv2.AverageValueMetricType && tr.MetricType != autoscalingv2.ValueMetricType {
		t.Errorf("%s: metricType %q, want AverageValue or Value", kedaFile, tr.MetricType)
	}
	checkMetricNames(t, kedaFile, tr.Metadata["query"])
}

// TestHPAExample: hpa.yaml decodes strictly into autoscaling/v2's
// HorizontalPodAutoscaler; it scales the Deployment of many-instances.yaml
// from one replica, with a scale-down cooldown, on External metrics the
// binary exports under their own names.
func TestHPAExample(t *testing.T) {
	d := scaledDeployment(t)
	var hpa autoscalingv2.HorizontalPodAutoscaler
	decodeOne(t, hpaFile, &hpa)
	if hpa.APIVersion != "autoscaling/v2" || hpa.Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("%s is %s %s, want autoscaling/v2 HorizontalPodAutoscaler", hpaFile, hpa.APIVersion, hpa.Kind)
	}
	ref := hpa.Spec.ScaleTargetRef
	checkTarget(t, hpaFile, hpa.Namespace, ref.APIVersion, ref.Kind, ref.Name, d)
	checkReplicas(t, hpaFile, deref(hpa.Spec.MinReplicas, 1), hpa.Spec.MaxReplicas, d)
	checkCooldown(t, hpaFile, hpa.Spec.Behavior)
	if len(hpa.Spec.Metrics) == 0 {
		t.Fatalf("%s has no metric", hpaFile)
	}
	for _, m := range hpa.Spec.Metrics {
		if m.Type != autoscalingv2.ExternalMetricSourceType || m.External == nil {
			t.Errorf("%s: a metric of type %s, want External (the lag is the stream's, not a pod's)", hpaFile, m.Type)
			continue
		}
		if _, ok := catalogue[m.External.Metric.Name]; !ok {
			t.Errorf("%s: External metric %q is none of the binary's metrics the dashboard knows (metrics.go)", hpaFile, m.External.Metric.Name)
		}
	}
}

// TestMetricNamesChecked: the check of a query's metric names fails on a
// name the binary does not export and on a query that names none.
func TestMetricNamesChecked(t *testing.T) {
	for _, query := range []string{`max(kinesis_stream_lag_ms{stream="orders"})`, `vector(1)`} {
		if err := unknownMetrics(query); err == nil {
			t.Errorf("unknownMetrics(%q) = nil, want an error", query)
		}
	}
	if err := unknownMetrics(`max(kinesis_stream_millis_behind_latest{stream="orders"})`); err != nil {
		t.Errorf("the lag query: %v", err)
	}
}

// metricName finds the names of the binary's metrics in a query: those of
// the input (kinesis_) and of its process and Go collectors.
var metricName = regexp.MustCompile(`\b(kinesis|process|go)_[a-z0-9_]+\b`)

func checkMetricNames(t *testing.T, file, query string) {
	t.Helper()
	if err := unknownMetrics(query); err != nil {
		t.Errorf("%s: %v", file, err)
	}
}

// unknownMetrics says what in query is not one of the binary's metrics the
// dashboard knows (metrics.go), or that it names none.
func unknownMetrics(query string) error {
	names := metricName.FindAllString(query, -1)
	if len(names) == 0 {
		return fmt.Errorf("query %q names none of the binary's metrics", query)
	}
	for _, n := range names {
		if _, ok := catalogue[n]; !ok {
			return fmt.Errorf("query %q names %s, none of the binary's metrics the dashboard knows (metrics.go)", query, n)
		}
	}
	return nil
}

// scaledDeployment is the Deployment of many-instances.yaml.
func scaledDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for i, doc := range documents(t, scaledFile) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s document %d: %v", scaledFile, i, err)
		}
		if head.Kind == "Deployment" {
			d := &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(doc, d); err != nil {
				t.Fatalf("%s document %d: %v", scaledFile, i, err)
			}
			return d
		}
	}
	t.Fatalf("%s has no Deployment", scaledFile)
	return nil
}

// decodeOne decodes the one document of file strictly into obj.
func decodeOne(t *testing.T, file string, obj any) {
	t.Helper()
	docs := documents(t, file)
	if len(docs) != 1 {
		t.Fatalf("%s has %d documents, want 1", file, len(docs))
	}
	if err := yaml.UnmarshalStrict(docs[0], obj); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func checkTarget(t *testing.T, file, namespace, apiVersion, kind, name string, d *appsv1.Deployment) {
	t.Helper()
	if apiVersion != "apps/v1" || kind != "Deployment" || name != d.Name || namespace != d.Namespace {
		t.Errorf("%s scales %s %s %q in namespace %q, want apps/v1 Deployment %q in namespace %q (%s)",
			file, apiVersion, kind, name, namespace, d.Name, d.Namespace, scaledFile)
	}
}

// checkReplicas: never zero (with no instance nothing exports the lag that
// would scale it up again), and the Deployment's own count within the
// bounds, so applying the autoscaler does not move it at once.
func checkReplicas(t *testing.T, file string, lo, hi int32, d *appsv1.Deployment) {
	t.Helper()
	replicas := deref(d.Spec.Replicas, 1)
	if lo < 1 || lo > hi || replicas < lo || replicas > hi {
		t.Errorf("%s: replicas from %d to %d, want at least 1, and the %d of %s within", file, lo, hi, replicas, scaledFile)
	}
}

func checkCooldown(t *testing.T, file string, b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	t.Helper()
	if b == nil || b.ScaleDown == nil || deref(b.ScaleDown.StabilizationWindowSeconds, 0) < minCooldown {
		t.Errorf("%s: no scale-down stabilization window of %d s or more (the cooldown)", file, minCooldown)
	}
}

func deref[T any](p *T, zero T) T {
	if p == nil {
		return zero
	}
	return *p
}
