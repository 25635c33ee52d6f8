package helm

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// The values files the tests render the chart with, as a user writes
// them for `helm install -f`.
const (
	// fullValues turns every optional part on: a Redis Cluster with its
	// user and password, the aclfile, the HTTP and gRPC doors, the HPA, the
	// ServiceMonitor, TLS to the store with a CA mounted from a volume of
	// the user's, and every pass-through of values.yaml.
	fullValues = `
store:
  cluster: redis-0.redis:6379,redis-1.redis:6379,redis-2.redis:6379
  user: sluice
  tls: true
  timeout: 80ms
secrets:
  aclfile: |
    user default on >client-Pw1 ~* +@limit +@slot
    user admin on >admin-Pw2 ~* +@all
  storePassword: redis-Pw3
http:
  enabled: true
grpc:
  enabled: true
autoscaling:
  enabled: true
  minReplicas: 3
  maxReplicas: 12
serviceMonitor:
  enabled: true
  labels:
    release: prometheus
podAnnotations:
  team: edge
extraArgs:
  - --max-clients=20000
  - --store-tls-ca-file=/etc/sluice/redis-ca/ca.pem
extraEnv:
  - name: GOMEMLIMIT
    value: 230MiB
extraVolumes:
  - name: redis-ca
    configMap:
      name: redis-ca
extraVolumeMounts:
  - name: redis-ca
    mountPath: /etc/sluice/redis-ca
    readOnly: true
imagePullSecrets:
  - name: registry
service:
  annotations:
    example.com/note: resp
serviceAccount:
  annotations:
    example.com/role: none
nodeSelector:
  kubernetes.io/os: linux
tolerations:
  - key: dedicated
    operator: Equal
    value: edge
    effect: NoSchedule
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: sluice
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app.kubernetes.io/name: sluice
`
	// passwordValues has the default and admin users' passwords (no
	// aclfile) and a single Redis node.
	passwordValues = `
store:
  redis: redis://redis-master:6379
secrets:
  requirepass: client-Pw1
  adminPass: admin-Pw2
  storePassword: redis-Pw3
`
	// sentinelValues has a Sentinel store and a Secret of the user's own.
	sentinelValues = `
store:
  sentinel: mymaster@sentinel-0:26379,sentinel-1:26379
  sentinelUser: watcher
secrets:
  existingSecret: my-sluice-secrets
  existingSecretKeys:
    requirepass: client
    sentinelPassword: sentinel
`
)

// valuesCase is one values file and what its render must hold.
type valuesCase struct {
	name   string
	values string
	// kinds are the "apiVersion kind" of every object rendered, sorted.
	kinds []string
	// args are flags the container's args must hold, beside the ones every
	// render has (valuesFlags).
	args []string
	// secretItems are the Secret's keys mounted, by the file each
	// becomes under /etc/sluice/secrets.
	secretItems map[string]string
	// secretName is the Secret the pods mount ("" = none).
	secretName string
}

var valuesCases = []valuesCase{
	{
		// Every optional object off: sluice's built-in catch-all policy.
		name:   "nothing optional",
		values: "config: {policies: ''}\npodDisruptionBudget: {enabled: false}\nserviceAccount: {create: false}\n",
		kinds:  []string{"apps/v1 Deployment", "v1 Service"},
	},
	{
		name: "defaults",
		kinds: []string{"apps/v1 Deployment", "policy/v1 PodDisruptionBudget", "v1 ConfigMap",
			"v1 Service", "v1 ServiceAccount"},
	},
	{
		name: "full", values: fullValues,
		kinds: []string{"apps/v1 Deployment", "autoscaling/v2 HorizontalPodAutoscaler",
			"monitoring.coreos.com/v1 ServiceMonitor", "policy/v1 PodDisruptionBudget",
			"v1 ConfigMap", "v1 Secret", "v1 Service", "v1 ServiceAccount"},
		args: []string{"--http=:8080", "--grpc=:8081",
			"--cluster=redis-0.redis:6379,redis-1.redis:6379,redis-2.redis:6379",
			"--store-user=sluice", "--store-tls", "--timeout=80ms",
			"--aclfile=/etc/sluice/secrets/users.acl",
			"--store-pass-file=/etc/sluice/secrets/store-pass", "--max-clients=20000",
			"--store-tls-ca-file=/etc/sluice/redis-ca/ca.pem"},
		secretItems: map[string]string{"users.acl": "users.acl", "store-pass": "store-pass"},
		secretName:  "rl-sluice",
	},
	{
		name: "passwords", values: passwordValues,
		kinds: []string{"apps/v1 Deployment", "policy/v1 PodDisruptionBudget", "v1 ConfigMap",
			"v1 Secret", "v1 Service", "v1 ServiceAccount"},
		args: []string{"--redis=redis://redis-master:6379",
			"--requirepass-file=/etc/sluice/secrets/requirepass",
			"--admin-pass-file=/etc/sluice/secrets/admin-pass",
			"--store-pass-file=/etc/sluice/secrets/store-pass"},
		secretItems: map[string]string{"requirepass": "requirepass", "admin-pass": "admin-pass", "store-pass": "store-pass"},
		secretName:  "rl-sluice",
	},
	{
		name: "sentinel and an existing Secret", values: sentinelValues,
		kinds: []string{"apps/v1 Deployment", "policy/v1 PodDisruptionBudget", "v1 ConfigMap",
			"v1 Service", "v1 ServiceAccount"},
		args: []string{"--sentinel=mymaster@sentinel-0:26379,sentinel-1:26379", "--sentinel-user=watcher",
			"--requirepass-file=/etc/sluice/secrets/requirepass",
			"--sentinel-pass-file=/etc/sluice/secrets/sentinel-pass"},
		secretItems: map[string]string{"client": "requirepass", "sentinel": "sentinel-pass"},
		secretName:  "my-sluice-secrets",
	},
}

// valuesFlags are in the args of every render.
var valuesFlags = []string{"--listen=:6380", "--admin=:9380", "--log-format=json", "--log-level=info"}

// readValues parses a values file.
func readValues(t *testing.T, text string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(text))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	return v.AsMap()
}
