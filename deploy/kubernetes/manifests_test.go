package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cordon-sandbox/cordon/internal/hostfile"
	"github.com/cordon-sandbox/cordon/internal/server"
)

// testSecrets is what the test writes as secrets/cordon.env, the file the
// user provides: the real one is never read.
const testSecrets = `database-url=postgres://cordon:test@postgres.test:5432/cordon?sslmode=verify-full
cluster-secret=dGVzdC1vbmx5LWNsdXN0ZXItc2VjcmV0LW9mLW1vcmUtdGhhbi0zMi1ieXRlcw
`

const kustomizeRoot = "/base"

// baseFS copies this directory's kustomization into an in-memory file
// system, without the Go files and without secrets/ (the user's, which
// git ignores), and writes secrets with the given content unless empty.
func baseFS(t *testing.T, secrets string) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "secrets" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := path.Join(kustomizeRoot, filepath.ToSlash(p))
		if err := mem.MkdirAll(path.Dir(dst)); err != nil {
			return err
		}
		return mem.WriteFile(dst, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if secrets != "" {
		if err := mem.MkdirAll(kustomizeRoot + "/secrets"); err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile(kustomizeRoot+"/secrets/cordon.env", []byte(secrets)); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// render runs Kustomize, as kubectl apply -k does, and returns each
// object's YAML.
func render(mem filesys.FileSystem) ([][]byte, error) { return renderAt(mem, kustomizeRoot) }

func renderAt(mem filesys.FileSystem, root string) ([][]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, root)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		docs = append(docs, y)
	}
	return docs, nil
}

// objects is what the kustomization makes, decoded into the API's types.
type objects struct {
	namespaces []*corev1.Namespace
	runtime    []*nodev1.RuntimeClass
	services   []*corev1.Service
	sets       []*appsv1.StatefulSet
	budgets    []*policyv1.PodDisruptionBudget
	policies   []*networkingv1.NetworkPolicy
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
}

// kinds are the only objects the kustomization may make.
var kinds = map[string]func(o *objects) any{
	"v1/Namespace": func(o *objects) any {
		x := &corev1.Namespace{}
		o.namespaces = append(o.namespaces, x)
		return x
	},
	"node.k8s.io/v1/RuntimeClass": func(o *objects) any {
		x := &nodev1.RuntimeClass{}
		o.runtime = append(o.runtime, x)
		return x
	},
	"v1/Service": func(o *objects) any {
		x := &corev1.Service{}
		o.services = append(o.services, x)
		return x
	},
	"apps/v1/StatefulSet": func(o *objects) any {
		x := &appsv1.StatefulSet{}
		o.sets = append(o.sets, x)
		return x
	},
	"policy/v1/PodDisruptionBudget": func(o *objects) any {
		x := &policyv1.PodDisruptionBudget{}
		o.budgets = append(o.budgets, x)
		return x
	},
	"networking.k8s.io/v1/NetworkPolicy": func(o *objects) any {
		x := &networkingv1.NetworkPolicy{}
		o.policies = append(o.policies, x)
		return x
	},
	"v1/ConfigMap": func(o *objects) any {
		x := &corev1.ConfigMap{}
		o.configMaps = append(o.configMaps, x)
		return x
	},
	"v1/Secret": func(o *objects) any {
		x := &corev1.Secret{}
		o.secrets = append(o.secrets, x)
		return x
	},
}

// decode decodes every document strictly: a field the API's type does not
// have, a field given twice, or a kind not in kinds is an error.
func decode(docs [][]byte) (*objects, error) {
	o := &objects{}
	for _, doc := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, err
		}
		into, ok := kinds[head.APIVersion+"/"+head.Kind]
		if !ok {
			return nil, fmt.Errorf("unexpected object %s %s:\n%s", head.APIVersion, head.Kind, doc)
		}
		if err := yaml.UnmarshalStrict(doc, into(o)); err != nil {
			return nil, fmt.Errorf("%s %s: %w", head.APIVersion, head.Kind, err)
		}
	}
	return o, nil
}

func renderBase(t *testing.T) *objects {
	t.Helper()
	docs, err := render(baseFS(t, testSecrets))
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	o, err := decode(docs)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// deepCopy copies every object, for a test to break.
func (o *objects) deepCopy() *objects {
	c := &objects{}
	for _, x := range o.namespaces {
		c.namespaces = append(c.namespaces, x.DeepCopy())
	}
	for _, x := range o.runtime {
		c.runtime = append(c.runtime, x.DeepCopy())
	}
	for _, x := range o.services {
		c.services = append(c.services, x.DeepCopy())
	}
	for _, x := range o.sets {
		c.sets = append(c.sets, x.DeepCopy())
	}
	for _, x := range o.budgets {
		c.budgets = append(c.budgets, x.DeepCopy())
	}
	for _, x := range o.policies {
		c.policies = append(c.policies, x.DeepCopy())
	}
	for _, x := range o.configMaps {
		c.configMaps = append(c.configMaps, x.DeepCopy())
	}
	for _, x := range o.secrets {
		c.secrets = append(c.secrets, x.DeepCopy())
	}
	return c
}

// TestManifests renders the kustomization and passes every check.
func TestManifests(t *testing.T) {
	o := renderBase(t)
	for _, p := range inspect(t, o) {
		t.Errorf("%s: %s", p.check, p.msg)
	}
}

// TestChecksFail breaks a rendered copy in one way at a time and wants the
// check made for it to say so: every check can fail.
func TestChecksFail(t *testing.T) {
	base := renderBase(t)
	pod := func(o *objects) *corev1.PodSpec { return &o.sets[0].Spec.Template.Spec }
	ctr := func(o *objects) *corev1.Container { return &pod(o).Containers[0] }
	sc := func(o *objects) *corev1.SecurityContext { return ctr(o).SecurityContext }
	ptr := func(b bool) *bool { return &b }
	envVar := func(o *objects, name string) *corev1.EnvVar { _, e := envOf(ctr(o), name); return e }
	editServe := func(o *objects, old, new string) {
		cm := configMapOf(o, pod(o))
		s := cm.Data["serve.yaml"]
		if !strings.Contains(s, old) {
			t.Fatalf("serve.yaml has no %q", old)
		}
		cm.Data["serve.yaml"] = strings.Replace(s, old, new, 1)
	}
	cases := []struct {
		check, name string
		breakIt     func(o *objects)
	}{
		{"kinds", "no disruption budget", func(o *objects) { o.budgets = nil }},
		{"kinds", "a third Service", func(o *objects) { o.services = append(o.services, o.services[0].DeepCopy()) }},
		{"namespaced", "a Service elsewhere", func(o *objects) { o.services[0].Namespace = "default" }},
		{"pod-security-level", "a baseline namespace", func(o *objects) {
			o.namespaces[0].Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		}},
		{"host-users", "the machine's users", func(o *objects) { pod(o).HostUsers = ptr(true) }},
		{"host-users", "hostUsers unset", func(o *objects) { pod(o).HostUsers = nil }},
		{"host-namespaces", "the machine's pids", func(o *objects) { pod(o).HostPID = true }},
		{"host-namespaces", "a hostPath", func(o *objects) {
			pod(o).Volumes = append(pod(o).Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}},
		{"service-account-token", "a token", func(o *objects) { pod(o).AutomountServiceAccountToken = nil }},
		{"privileged", "privileged: true", func(o *objects) { sc(o).Privileged = ptr(true) }},
		{"privileged", "a privileged init container", func(o *objects) {
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)}})
		}},
		{"privilege-escalation", "escalation allowed", func(o *objects) { sc(o).AllowPrivilegeEscalation = ptr(true) }},
		{"privilege-escalation", "escalation unset", func(o *objects) { sc(o).AllowPrivilegeEscalation = nil }},
		{"capabilities", "CAP_SYS_ADMIN added", func(o *objects) { sc(o).Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} }},
		{"capabilities", "nothing dropped", func(o *objects) { sc(o).Capabilities.Drop = nil }},
		{"read-only-root", "a writable root", func(o *objects) { sc(o).ReadOnlyRootFilesystem = ptr(false) }},
		{"non-root", "uid 0", func(o *objects) {
			var root int64
			sc(o).RunAsUser, pod(o).SecurityContext.RunAsUser = &root, &root
		}},
		{"proc-mount", "masked /proc", func(o *objects) { p := corev1.DefaultProcMount; sc(o).ProcMount = &p }},
		{"seccomp", "the runtime's seccomp profile", func(o *objects) {
			sc(o).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}},
		{"apparmor", "the runtime's AppArmor profile", func(o *objects) {
			sc(o).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		}},
		{"startup-probe", "no startup probe", func(o *objects) { ctr(o).StartupProbe = nil }},
		{"startup-probe", "an impatient startup probe", func(o *objects) { ctr(o).StartupProbe.FailureThreshold = 2 }},
		{"readiness-probe", "another path", func(o *objects) { ctr(o).ReadinessProbe.HTTPGet.Path = "/healthz" }},
		{"readiness-probe", "no readiness probe", func(o *objects) { ctr(o).ReadinessProbe = nil }},
		{"liveness-probe", "another port", func(o *objects) { ctr(o).LivenessProbe.HTTPGet.Port = intstr.FromInt32(8080) }},
		{"liveness-probe", "as quick as readiness", func(o *objects) { ctr(o).LivenessProbe.FailureThreshold = 2 }},
		{"liveness-probe", "kills a draining node", func(o *objects) { ctr(o).LivenessProbe.PeriodSeconds = 5 }},
		{"resources", "no limits", func(o *objects) { ctr(o).Resources.Limits = nil }},
		{"resources", "an init container without resources", func(o *objects) {
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init"})
		}},
		{"sizing", "a smaller memory limit", func(o *objects) { ctr(o).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi") }},
		{"sizing", "more sandboxes", func(o *objects) { editServe(o, "max_sandboxes: 6", "max_sandboxes: 16") }},
		{"sizing", "a small state volume", func(o *objects) { q := resource.MustParse("256Mi"); volume(pod(o), "state").EmptyDir.SizeLimit = &q }},
		{"env", "CORDON_NODE from a literal", func(o *objects) {
			e := envVar(o, "CORDON_NODE")
			e.ValueFrom, e.Value = nil, "cordon-0"
		}},
		{"env", "POD_NAMESPACE after CORDON_ADVERTISE", func(o *objects) {
			env := ctr(o).Env
			i, _ := envOf(ctr(o), "POD_NAMESPACE")
			e := env[i]
			env = slices.Delete(env, i, i+1)
			ctr(o).Env = append(env, e)
		}},
		{"env", "another advertised URL", func(o *objects) { envVar(o, "CORDON_ADVERTISE").Value = "http://cordon:8700" }},
		{"env", "the database in the clear", func(o *objects) {
			e := envVar(o, "CORDON_DATABASE")
			e.ValueFrom, e.Value = nil, "postgres://cordon@db/cordon"
		}},
		{"env", "a key the Secret lacks", func(o *objects) { envVar(o, "CORDON_CLUSTER_SECRET").ValueFrom.SecretKeyRef.Key = "secret" }},
		{"env", "a short cluster secret", func(o *objects) { o.secrets[0].Data[secretCluster] = []byte("short") }},
		{"env", "an optional secret", func(o *objects) { envVar(o, "CORDON_CLUSTER_SECRET").ValueFrom.SecretKeyRef.Optional = ptr(true) }},
		{"grace", "a short grace period", func(o *objects) { g := int64(20); pod(o).TerminationGracePeriodSeconds = &g }},
		{"grace", "a longer drain", func(o *objects) { editServe(o, "drain_grace: 30s", "drain_grace: 1m") }},
		{"command", "another configuration", func(o *objects) { ctr(o).Command[3] = "/etc/cordon/config.yaml" }},
		{"config-mounts", "the ConfigMap mounted whole", func(o *objects) {
			var ms []corev1.VolumeMount
			for _, m := range ctr(o).VolumeMounts {
				if m.Name != "config" {
					ms = append(ms, m)
				}
			}
			ctr(o).VolumeMounts = append(ms, corev1.VolumeMount{Name: "config", MountPath: "/etc/cordon", ReadOnly: true})
		}},
		{"config-mounts", "a profile mounted nowhere", func(o *objects) {
			configMapOf(o, pod(o)).Data["other.yaml"] = "version: 1\n"
		}},
		{"config-mounts", "a writable mount", func(o *objects) { mountAt(ctr(o), configPath).ReadOnly = false }},
		{"serve-yaml", "a loopback listener", func(o *objects) { editServe(o, "listen: 0.0.0.0:8700", "listen: 127.0.0.1:8700") }},
		{"serve-yaml", "another heartbeat", func(o *objects) { editServe(o, "heartbeat: 2s", "heartbeat: 5s") }},
		{"serve-yaml", "an invented cluster key", func(o *objects) { editServe(o, "node_timeout: 15s", "node_timeout: 15s\n  peers: 3") }},
		{"serve-yaml", "few connections per address", func(o *objects) {
			editServe(o, "max_connections_per_remote: 1024", "max_connections_per_remote: 128")
		}},
		{"services", "a Service with a virtual IP for the nodes", func(o *objects) { serviceNamed(o, nodesService).Spec.ClusterIP = "" }},
		{"services", "ready names only", func(o *objects) { serviceNamed(o, nodesService).Spec.PublishNotReadyAddresses = false }},
		{"services", "another port", func(o *objects) { serviceNamed(o, apiService).Spec.Ports[0].TargetPort = intstr.FromInt32(80) }},
		{"services", "a selector of nothing", func(o *objects) { serviceNamed(o, apiService).Spec.Selector = map[string]string{"app": "other"} }},
		{"services", "no affinity for MCP sessions", func(o *objects) { serviceNamed(o, apiService).Spec.SessionAffinity = corev1.ServiceAffinityNone }},
		{"services", "an affinity shorter than a session", func(o *objects) {
			*serviceNamed(o, apiService).Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = 600
		}},
		{"volumes", "the audit log on an emptyDir", func(o *objects) {
			pod(o).Volumes = append(pod(o).Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			mountAt(ctr(o), "/var/lib/cordon/audit").Name = "scratch"
		}},
		{"volumes", "the audit logs deleted with the pods", func(o *objects) {
			o.sets[0].Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}},
		{"writable-paths", "no /tmp", func(o *objects) {
			ctr(o).VolumeMounts = slices.DeleteFunc(ctr(o).VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
		}},
		{"runtime-class", "the default runtime", func(o *objects) { pod(o).RuntimeClassName = nil }},
		{"runtime-class", "on any machine", func(o *objects) { o.runtime[0].Scheduling = nil }},
		{"disruption-budget", "two at a time", func(o *objects) { m := intstr.FromInt32(2); o.budgets[0].Spec.MaxUnavailable = &m }},
		{"disruption-budget", "a node never ready blocks drains", func(o *objects) { o.budgets[0].Spec.UnhealthyPodEvictionPolicy = nil }},
		{"sizing", "less memory asked for than used", func(o *objects) { ctr(o).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi") }},
		{"kinds", "no NetworkPolicy", func(o *objects) { o.policies = nil }},
		{"namespaced", "a NetworkPolicy elsewhere", func(o *objects) { o.policies[0].Namespace = "default" }},
		{"network-policy", "egress only", func(o *objects) {
			o.policies[0].Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}},
		{"network-policy", "another port open", func(o *objects) {
			p := intstr.FromInt32(22)
			o.policies[0].Spec.Ingress = append(o.policies[0].Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &p}}})
		}},
		{"network-policy", "every port open", func(o *objects) { o.policies[0].Spec.Ingress[0].Ports = nil }},
		{"network-policy", "the metadata service reachable", func(o *objects) {
			for _, r := range o.policies[0].Spec.Egress {
				for _, peer := range r.To {
					if peer.IPBlock != nil {
						peer.IPBlock.Except = nil
					}
				}
			}
		}},
		{"network-policy", "no names", func(o *objects) { o.policies[0].Spec.Egress = o.policies[0].Spec.Egress[1:] }},
		{"network-policy", "no way to the other nodes", func(o *objects) {
			o.policies[0].Spec.Egress[1].To = o.policies[0].Spec.Egress[1].To[1:]
		}},
		{"network-policy", "another pod's policy", func(o *objects) {
			o.policies[0].Spec.PodSelector.MatchLabels = map[string]string{"app": "other"}
		}},
		{"image", "the image not named", func(o *objects) { ctr(o).Image = "cordon" }},
		{"host-namespaces", "a port of the machine", func(o *objects) { ctr(o).Ports[0].HostPort = apiPort }},
		{"service-account-token", "a projected token", func(o *objects) {
			pod(o).Volumes = append(pod(o).Volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
		}},
		{"proc-mount", "an unmasked sidecar", func(o *objects) {
			p := corev1.UnmaskedProcMount
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init", SecurityContext: &corev1.SecurityContext{ProcMount: &p}})
		}},
		{"seccomp", "a sidecar without a profile", func(o *objects) {
			pod(o).SecurityContext.SeccompProfile = nil
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init"})
		}},
		{"seccomp", "an unconfined sidecar", func(o *objects) {
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init", SecurityContext: &corev1.SecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}})
		}},
		{"apparmor", "a sidecar without AppArmor", func(o *objects) {
			pod(o).InitContainers = append(pod(o).InitContainers, corev1.Container{Name: "init", SecurityContext: &corev1.SecurityContext{
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}})
		}},
		{"startup-probe", "a doctor at once", func(o *objects) { ctr(o).StartupProbe.InitialDelaySeconds = 0 }},
		{"grace", "no time to stop after the drain", func(o *objects) { g := int64(31); pod(o).TerminationGracePeriodSeconds = &g }},
		{"selinux", "a super-privileged container", func(o *objects) { sc(o).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"} }},
		{"secrets", "every key of the Secret", func(o *objects) {
			ctr(o).EnvFrom = append(ctr(o).EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.secrets[0].Name}}})
		}},
		{"secrets", "a third variable from the Secret", func(o *objects) {
			e := *envVar(o, "CORDON_DATABASE")
			e.Name = "PGPASSWORD"
			ctr(o).Env = append(ctr(o).Env, e)
		}},
		{"secrets", "the Secret as files", func(o *objects) {
			pod(o).Volumes = append(pod(o).Volumes, corev1.Volume{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.secrets[0].Name}}})
		}},
		{"sandbox-view", "a volume the sandboxes see", func(o *objects) {
			ctr(o).VolumeMounts = append(ctr(o).VolumeMounts, corev1.VolumeMount{Name: "state", MountPath: "/opt/cordon/state"})
		}},
		{"sandbox-view", "a volume over what the sandboxes see", func(o *objects) {
			ctr(o).VolumeMounts = append(ctr(o).VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/etc/ssl"})
		}},
	}
	broken := map[string]bool{}
	for _, tt := range cases {
		broken[tt.check] = true
		t.Run(tt.check+"/"+tt.name, func(t *testing.T) {
			o := base.deepCopy()
			tt.breakIt(o)
			found := false
			for _, p := range inspect(t, o) {
				if p.check == tt.check {
					found = true
					t.Logf("%s: %s", p.check, p.msg)
				}
			}
			if !found {
				t.Errorf("check %s did not see it", tt.check)
			}
		})
	}
	// Every check is among those shown failing.
	for _, ch := range checks {
		if !broken[ch.name] {
			t.Errorf("check %s: no case here breaks what it checks", ch.name)
		}
	}
}

// TestRenderNeedsSecrets: without the file of secrets the user writes,
// nothing renders, so no example secret is ever applied.
func TestRenderNeedsSecrets(t *testing.T) {
	if _, err := render(baseFS(t, "")); err == nil || !strings.Contains(err.Error(), "cordon.env") {
		t.Fatalf("rendered without secrets/cordon.env: %v", err)
	}
}

// TestDecodeIsStrict: an unknown field and an unexpected kind are errors.
func TestDecodeIsStrict(t *testing.T) {
	docs, err := render(baseFS(t, testSecrets))
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range docs {
		if !strings.Contains(string(doc), "kind: StatefulSet") {
			continue
		}
		bad := slices.Clone(docs)
		bad[i] = []byte(strings.Replace(string(doc), "hostUsers: false", "hostUsers: false\n      hostUser: false", 1))
		if _, err := decode(bad); err == nil || !strings.Contains(err.Error(), `unknown field "hostUser"`) {
			t.Errorf("an unknown field decoded: %v", err)
		}
	}
	extra := append(slices.Clone(docs), []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\n"))
	if _, err := decode(extra); err == nil || !strings.Contains(err.Error(), "DaemonSet") {
		t.Errorf("an unexpected kind decoded: %v", err)
	}
}

// TestServeYAMLLoads loads serve.yaml and the profiles, laid out as the
// pod's mounts place them, with cordon serve's own loader.
func TestServeYAMLLoads(t *testing.T) {
	o := renderBase(t)
	c := &ctx{set: o.sets[0]}
	c.pod = &c.set.Spec.Template.Spec
	c.container = &c.pod.Containers[0]
	c.config = configMapOf(o, c.pod)
	if c.config == nil {
		t.Fatal("no ConfigMap")
	}
	t.Run("without cluster", func(t *testing.T) {
		cfg, err := loadMounted(c, t.TempDir(), true)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Listen != "0.0.0.0:8700" || cfg.Grace != 30*time.Second || cfg.Agents["agent"] == nil || len(cfg.Tokens) != 2 {
			t.Errorf("loaded %+v", cfg)
		}
	})
	t.Run("whole", func(t *testing.T) {
		cfg, err := loadMounted(c, t.TempDir(), false)
		if err != nil {
			t.Fatal(err)
		}
		if beat, timeout := cfg.Cluster.Times(); beat != 2*time.Second || timeout != 15*time.Second {
			t.Errorf("the cluster's heartbeat %s and node timeout %s, want 2s and 15s", beat, timeout)
		}
	})
}

// TestConfigMapVolumeRefused shows why each file is mounted with subPath:
// a ConfigMap volume mounted whole reaches its files through symbolic
// links (serve.yaml -> ..data/serve.yaml, ..data -> ..TIMESTAMP), and
// cordon reads its configuration through none.
func TestConfigMapVolumeRefused(t *testing.T) {
	o := renderBase(t)
	cm := configMapOf(o, &o.sets[0].Spec.Template.Spec)
	dir := filepath.Join(t.TempDir(), "etc", "cordon")
	stamp := filepath.Join(dir, "..2026_01_01_00_00_00.000000000")
	if err := os.MkdirAll(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	for key, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(stamp, key), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	_, err := server.LoadConfig(filepath.Join(dir, "serve.yaml"))
	if !errors.Is(err, hostfile.ErrSymlink) {
		t.Fatalf("a configuration reached through links: %v", err)
	}
}

// TestOverlay: the base is a base. An overlay in another namespace moves
// every object there, the Namespace object too, and passes every check.
func TestOverlay(t *testing.T) {
	mem := baseFS(t, testSecrets)
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: agents\nresources:\n  - ../base\n"
	if err := mem.MkdirAll("/overlay"); err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	docs, err := renderAt(mem, "/overlay")
	if err != nil {
		t.Fatal(err)
	}
	o, err := decode(docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.namespaces) != 1 || o.namespaces[0].Name != "agents" {
		t.Fatalf("the overlay's namespace: %+v", o.namespaces)
	}
	for _, p := range inspect(t, o) {
		t.Errorf("%s: %s", p.check, p.msg)
	}
}

// podEnv is the container's environment as the kubelet makes it for the
// StatefulSet's first pod: the downward API's name and namespace, the
// Secret's keys, and $(VAR) expanded from the variables defined before.
func podEnv(t *testing.T, o *objects, c *corev1.Container) map[string]string {
	t.Helper()
	set := o.sets[0]
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = set.Name + "-0"
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = set.Namespace
		case e.ValueFrom.SecretKeyRef != nil:
			for _, s := range o.secrets {
				if s.Name == e.ValueFrom.SecretKeyRef.Name {
					env[e.Name] = string(s.Data[e.ValueFrom.SecretKeyRef.Key])
				}
			}
		default:
			t.Fatalf("%s: a source the test does not know", e.Name)
		}
	}
	return env
}

// expand does what the kubelet does to a variable's value: $(NAME) of a
// variable defined before becomes its value, $$ a $, the rest stays.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "$("):
			end := strings.IndexByte(s[i:], ')')
			if v, ok := env[s[i+2:i+max(end, 2)]]; end > 0 && ok {
				b.WriteString(v)
				i += end
				continue
			}
			b.WriteByte(s[i])
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "a", "B": "b"}
	for in, want := range map[string]string{"$(A).$(B)": "a.b", "$(C)": "$(C)", "$$(A)": "$(A)", "x$(A": "x$(A", "$()": "$()"} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNodeEnvironment gives the environment the pod's container gets to
// cordon serve's own reading of it: the node's name, the URL the others
// forward to, the cluster secret.
func TestNodeEnvironment(t *testing.T) {
	o := renderBase(t)
	c := &ctx{set: o.sets[0]}
	c.pod = &c.set.Spec.Template.Spec
	c.container = &c.pod.Containers[0]
	c.config = configMapOf(o, c.pod)
	env := podEnv(t, o, c.container)
	want := "http://cordon-0." + nodesService + "." + c.set.Namespace + ".svc.cluster.local:8700"
	if env["CORDON_NODE"] != "cordon-0" || env["CORDON_ADVERTISE"] != want {
		t.Fatalf("CORDON_NODE %q, CORDON_ADVERTISE %q; want cordon-0 and %s", env["CORDON_NODE"], env["CORDON_ADVERTISE"], want)
	}
	cfg, err := loadAsMounted(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("cordon serve refuses the pod's environment: %v", err)
	}
	if cfg.Node != "cordon-0" {
		t.Errorf("the node is named %q", cfg.Node)
	}
	if cfg.Cluster.Advertise != want {
		t.Errorf("cordon serve advertises %q, want %s", cfg.Cluster.Advertise, want)
	}
}
