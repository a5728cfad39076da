package deploy

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaledObject mirrors the schema of KEDA's ScaledObject (keda.sh/v1alpha1,
// as github.com/kedacore/keda/v2/apis/keda/v1alpha1 defines it in v2.21),
// its spec only, for a strict decoding of autoscaling/keda.yaml. KEDA's
// own module is not used: v2.21.1 requires Go 1.27.4 (this module builds
// with 1.26), and v2.20.2 brings controller-runtime and a client-go that
// do not build against the k8s.io/api v0.37 this module uses (no package
// scheduling/v1alpha2), and about 230 MB more of modules to download.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef        *scaleTarget   `json:"scaleTargetRef"`
	PollingInterval       *int32         `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32         `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32         `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32         `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32         `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32         `json:"maxReplicaCount,omitempty"`
	Advanced              *kedaAdvanced  `json:"advanced,omitempty"`
	Triggers              []scaleTrigger `json:"triggers"`
	Fallback              *kedaFallback  `json:"fallback,omitempty"`
}

type scaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

type kedaAdvanced struct {
	HorizontalPodAutoscalerConfig *struct {
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		Name     string                                         `json:"name,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              struct {
		Formula          string                         `json:"formula,omitempty"`
		Target           string                         `json:"target,omitempty"`
		ActivationTarget string                         `json:"activationTarget,omitempty"`
		MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
	} `json:"scalingModifiers,omitempty"`
}

type scaleTrigger struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
	MetricType autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

type kedaFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// prometheusTriggerKeys are the metadata of KEDA's prometheus trigger
// (pkg/scalers/prometheus_scaler.go): the map is not checked by the
// decoding, so a misspelt key is caught here.
var prometheusTriggerKeys = map[string]bool{
	"serverAddress": true, "query": true, "queryParameters": true, "threshold": true,
	"activationThreshold": true, "namespace": true, "customHeaders": true, "ignoreNullValues": true,
	"unsafeSsl": true, "awsRegion": true, "timeout": true, "identityOwner": true, "authModes": true,
}
