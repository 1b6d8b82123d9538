package kubernetes

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/cordon-sandbox/cordon/internal/server"
)

// The names and values the deployment is built on.
const (
	nodesService  = "cordon-nodes"
	apiService    = "cordon"
	configPath    = "/etc/cordon/serve.yaml"
	apiPort       = 8700
	healthPath    = "/v1/health"
	secretDB      = "database-url"
	secretCluster = "cluster-secret"
	advertise     = "http://$(CORDON_NODE)." + nodesService + ".$(POD_NAMESPACE).svc.cluster.local:8700"
	// mcpSessionIdle is how long an MCP client may leave its session
	// idle and come back to it (cordon mcp --http ends it then; cordon
	// serve keeps it until the client ends it).
	mcpSessionIdle = time.Hour
	// stopAfterDrain is what a node stopping takes past drain_grace: it
	// ends its sandboxes, seals its audit log, sends the last of its
	// index and leaves the registry.
	stopAfterDrain = 10 * time.Second
)

// A check looks at the rendered objects and reports what is wrong, each
// problem in words; none when all is well.
type check struct {
	name string
	fn   func(o *objects, c *ctx) []string
}

// ctx is what several checks need: the StatefulSet's pod, the cordon
// container, the configuration it mounts, loaded.
type ctx struct {
	set       *appsv1.StatefulSet
	pod       *corev1.PodSpec
	container *corev1.Container
	config    *corev1.ConfigMap
	serve     map[string]any // serve.yaml as YAML
	loaded    *server.Config // serve.yaml through cordon's loader (see loadAsMounted)
	loadErr   error
}

// problem is one thing a check found.
type problem struct{ check, msg string }

// inspect runs every check, in order, on o.
func inspect(t *testing.T, o *objects) []problem {
	t.Helper()
	c := &ctx{}
	var out []problem
	if len(o.sets) != 1 || len(o.sets[0].Spec.Template.Spec.Containers) == 0 {
		return []problem{{"kinds", fmt.Sprintf("want one StatefulSet with a container, found %d", len(o.sets))}}
	}
	c.set = o.sets[0]
	c.pod = &c.set.Spec.Template.Spec
	c.container = &c.pod.Containers[0]
	for i := range c.pod.Containers {
		if c.pod.Containers[i].Name == "cordon" {
			c.container = &c.pod.Containers[i]
		}
	}
	c.config = configMapOf(o, c.pod)
	if c.config != nil {
		if err := yaml.Unmarshal([]byte(c.config.Data["serve.yaml"]), &c.serve); err != nil {
			out = append(out, problem{"serve-yaml", fmt.Sprintf("serve.yaml: %v", err)})
		}
		c.loaded, c.loadErr = loadAsMounted(t, c)
	}
	for _, ch := range checks {
		for _, msg := range ch.fn(o, c) {
			out = append(out, problem{ch.name, msg})
		}
	}
	return out
}

// configMapOf returns the ConfigMap the pod's volume "config" names.
func configMapOf(o *objects, pod *corev1.PodSpec) *corev1.ConfigMap {
	for _, v := range pod.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			for _, cm := range o.configMaps {
				if cm.Name == v.ConfigMap.Name {
					return cm
				}
			}
		}
	}
	return nil
}

// loadMounted lays out the files the container sees of the ConfigMap, as
// its volume mounts place them, below dir, and loads the configuration
// the command names with cordon's own loader. With dropCluster, the
// cluster: section is left out first.
func loadMounted(c *ctx, dir string, dropCluster bool) (*server.Config, error) {
	for _, m := range c.container.VolumeMounts {
		if !isConfigVolume(c.pod, m.Name) {
			continue
		}
		data, ok := c.config.Data[m.SubPath]
		if m.SubPath == "" || !ok {
			continue // reported by config-mounts
		}
		if m.SubPath == "serve.yaml" && dropCluster {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
				return nil, err
			}
			delete(doc, "cluster")
			b, err := yaml.Marshal(doc)
			if err != nil {
				return nil, err
			}
			data = string(b)
		}
		p := filepath.Join(dir, filepath.FromSlash(m.MountPath))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(data), 0o444); err != nil {
			return nil, err
		}
	}
	return server.LoadConfig(filepath.Join(dir, filepath.FromSlash(configPath)))
}

// loadAsMounted loads serve.yaml as the container sees it.
func loadAsMounted(t *testing.T, c *ctx) (*server.Config, error) {
	return loadMounted(c, t.TempDir(), false)
}

func isConfigVolume(pod *corev1.PodSpec, name string) bool {
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v.ConfigMap != nil
		}
	}
	return false
}

// effective returns the container's security settings with the pod's
// where the container sets none, as the kubelet applies them.
type effective struct {
	runAsNonRoot *bool
	runAsUser    *int64
	seccomp      *corev1.SeccompProfile
	apparmor     *corev1.AppArmorProfile
}

func effectiveOf(pod *corev1.PodSpec, c *corev1.Container) effective {
	var e effective
	if p := pod.SecurityContext; p != nil {
		e.runAsNonRoot, e.runAsUser, e.seccomp, e.apparmor = p.RunAsNonRoot, p.RunAsUser, p.SeccompProfile, p.AppArmorProfile
	}
	if s := c.SecurityContext; s != nil {
		if s.RunAsNonRoot != nil {
			e.runAsNonRoot = s.RunAsNonRoot
		}
		if s.RunAsUser != nil {
			e.runAsUser = s.RunAsUser
		}
		if s.SeccompProfile != nil {
			e.seccomp = s.SeccompProfile
		}
		if s.AppArmorProfile != nil {
			e.apparmor = s.AppArmorProfile
		}
	}
	return e
}

// allContainers are the pod's containers and init containers: a check of
// every container holds for both.
func allContainers(pod *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.InitContainers {
		out = append(out, &pod.InitContainers[i])
	}
	for i := range pod.Containers {
		out = append(out, &pod.Containers[i])
	}
	return out
}

func envOf(c *corev1.Container, name string) (int, *corev1.EnvVar) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return i, &c.Env[i]
		}
	}
	return -1, nil
}

func mountAt(c *corev1.Container, dir string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == dir {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func serviceNamed(o *objects, name string) *corev1.Service {
	for _, s := range o.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// selects reports whether a selector picks the pod template's labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isFalse(b *bool) bool { return b != nil && !*b }
func isTrue(b *bool) bool  { return b != nil && *b }

// drainGrace is serve.yaml's drain_grace, as the loader reads it (the
// server's default when unset).
func drainGrace(c *ctx) (time.Duration, error) {
	s, _ := c.serve["drain_grace"].(string)
	if s == "" {
		return server.DefaultDrainGrace, nil
	}
	return time.ParseDuration(s)
}

// Sizes of what a node's memory holds (docs/BENCHMARKS.md, docs/SERVER.md).
const (
	mib           = 1 << 20
	serveIdle     = 64 * mib   // cordon serve idle: about 24-30 MB measured; room for its own growth
	perWarm       = 1.2 * mib  // an idle pre-warmed sandbox of cordon serve
	perIdle       = 10.3 * mib // an idle cordon run: more than a claimed, idle sandbox of cordon serve takes
	perCommand    = 256 << 10  // a command's output buffers and captures
	stdinDecoding = 4          // a stdin is held about four times while decoded
)

var checks = []check{
	{"kinds", func(o *objects, c *ctx) []string {
		var out []string
		want := []struct {
			kind string
			n    int
		}{{"Namespace", len(o.namespaces)}, {"RuntimeClass", len(o.runtime)}, {"StatefulSet", len(o.sets)},
			{"PodDisruptionBudget", len(o.budgets)}, {"NetworkPolicy", len(o.policies)}, {"ConfigMap", len(o.configMaps)}, {"Secret", len(o.secrets)}}
		for _, w := range want {
			if w.n != 1 {
				out = append(out, fmt.Sprintf("want one %s, found %d", w.kind, w.n))
			}
		}
		if len(o.services) != 2 || serviceNamed(o, nodesService) == nil || serviceNamed(o, apiService) == nil {
			out = append(out, fmt.Sprintf("want the Services %s and %s, found %d", nodesService, apiService, len(o.services)))
		}
		return out
	}},
	{"namespaced", func(o *objects, c *ctx) []string {
		if len(o.namespaces) != 1 {
			return []string{"no Namespace to put the objects in"}
		}
		ns := o.namespaces[0].Name
		var out []string
		if c.set.Namespace != ns {
			out = append(out, fmt.Sprintf("StatefulSet %s is in namespace %q, not %q", c.set.Name, c.set.Namespace, ns))
		}
		for _, s := range o.services {
			if s.Namespace != ns {
				out = append(out, fmt.Sprintf("Service %s is in namespace %q, not %q", s.Name, s.Namespace, ns))
			}
		}
		for _, x := range o.configMaps {
			if x.Namespace != ns {
				out = append(out, fmt.Sprintf("ConfigMap %s is in namespace %q, not %q", x.Name, x.Namespace, ns))
			}
		}
		for _, x := range o.secrets {
			if x.Namespace != ns {
				out = append(out, fmt.Sprintf("Secret %s is in namespace %q, not %q", x.Name, x.Namespace, ns))
			}
		}
		for _, x := range o.budgets {
			if x.Namespace != ns {
				out = append(out, fmt.Sprintf("PodDisruptionBudget %s is in namespace %q, not %q", x.Name, x.Namespace, ns))
			}
		}
		for _, x := range o.policies {
			if x.Namespace != ns {
				out = append(out, fmt.Sprintf("NetworkPolicy %s is in namespace %q, not %q", x.Name, x.Namespace, ns))
			}
		}
		for _, x := range o.runtime {
			if x.Namespace != "" {
				out = append(out, fmt.Sprintf("RuntimeClass %s is cluster-scoped, but has namespace %q", x.Name, x.Namespace))
			}
		}
		return out
	}},
	{"pod-security-level", func(o *objects, c *ctx) []string {
		// The Unconfined profiles are refused below privileged: a
		// namespace enforcing baseline would refuse every pod.
		if len(o.namespaces) != 1 {
			return []string{"no Namespace"}
		}
		e := effectiveOf(c.pod, c.container)
		unconfined := e.seccomp != nil && e.seccomp.Type == corev1.SeccompProfileTypeUnconfined ||
			e.apparmor != nil && e.apparmor.Type == corev1.AppArmorProfileTypeUnconfined
		if level := o.namespaces[0].Labels["pod-security.kubernetes.io/enforce"]; unconfined && level != "privileged" {
			return []string{fmt.Sprintf("the pods use Unconfined profiles, which Pod Security Admission refuses at level %q: the namespace must enforce privileged", level)}
		}
		return nil
	}},
	{"host-users", func(o *objects, c *ctx) []string {
		if !isFalse(c.pod.HostUsers) {
			return []string{"spec.hostUsers must be false: the pod's own user namespace is what makes uid 0..65535 in it unprivileged on the machine, and what allows procMount: Unmasked"}
		}
		return nil
	}},
	{"host-namespaces", func(o *objects, c *ctx) []string {
		var out []string
		if c.pod.HostNetwork || c.pod.HostPID || c.pod.HostIPC {
			out = append(out, fmt.Sprintf("hostNetwork %v, hostPID %v, hostIPC %v: want none of the machine's namespaces", c.pod.HostNetwork, c.pod.HostPID, c.pod.HostIPC))
		}
		if isTrue(c.pod.ShareProcessNamespace) {
			out = append(out, "shareProcessNamespace: the pod's containers would see cordon's processes")
		}
		for _, v := range c.pod.Volumes {
			if v.HostPath != nil {
				out = append(out, fmt.Sprintf("volume %s is a hostPath", v.Name))
			}
		}
		for _, ct := range allContainers(c.pod) {
			for _, p := range ct.Ports {
				if p.HostPort != 0 {
					out = append(out, fmt.Sprintf("container %s takes the machine's port %d", ct.Name, p.HostPort))
				}
			}
		}
		return out
	}},
	{"service-account-token", func(o *objects, c *ctx) []string {
		var out []string
		if !isFalse(c.pod.AutomountServiceAccountToken) {
			out = append(out, "automountServiceAccountToken must be false: cordon needs nothing of the Kubernetes API")
		}
		for _, v := range c.pod.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					out = append(out, fmt.Sprintf("volume %s projects a service account token", v.Name))
				}
			}
		}
		return out
	}},
	{"privileged", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			if ct.SecurityContext != nil && isTrue(ct.SecurityContext.Privileged) {
				out = append(out, fmt.Sprintf("container %s is privileged", ct.Name))
			}
		}
		return out
	}},
	{"privilege-escalation", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			if ct.SecurityContext == nil || !isFalse(ct.SecurityContext.AllowPrivilegeEscalation) {
				out = append(out, fmt.Sprintf("container %s: allowPrivilegeEscalation must be false (no_new_privs)", ct.Name))
			}
		}
		return out
	}},
	{"capabilities", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			s := ct.SecurityContext
			if s == nil || s.Capabilities == nil || !slices.Contains(s.Capabilities.Drop, "ALL") {
				out = append(out, fmt.Sprintf("container %s: capabilities must drop ALL", ct.Name))
				continue
			}
			if len(s.Capabilities.Add) > 0 {
				out = append(out, fmt.Sprintf("container %s adds capabilities %v: rootless, cordon needs none", ct.Name, s.Capabilities.Add))
			}
		}
		return out
	}},
	{"read-only-root", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			if ct.SecurityContext == nil || !isTrue(ct.SecurityContext.ReadOnlyRootFilesystem) {
				out = append(out, fmt.Sprintf("container %s: readOnlyRootFilesystem must be true", ct.Name))
			}
		}
		return out
	}},
	{"non-root", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			e := effectiveOf(c.pod, ct)
			if !isTrue(e.runAsNonRoot) || e.runAsUser == nil || *e.runAsUser == 0 {
				out = append(out, fmt.Sprintf("container %s: want runAsNonRoot and a runAsUser other than 0", ct.Name))
			}
		}
		return out
	}},
	{"proc-mount", func(o *objects, c *ctx) []string {
		var out []string
		s := c.container.SecurityContext
		if s == nil || s.ProcMount == nil || *s.ProcMount != corev1.UnmaskedProcMount {
			out = append(out, "procMount must be Unmasked: with masked /proc paths the kernel refuses each sandbox a fresh /proc")
		}
		for _, ct := range others(c) {
			if s := ct.SecurityContext; s != nil && s.ProcMount != nil && *s.ProcMount == corev1.UnmaskedProcMount {
				out = append(out, fmt.Sprintf("container %s has an unmasked /proc: only cordon needs one", ct.Name))
			}
		}
		return out
	}},
	{"seccomp", func(o *objects, c *ctx) []string {
		var out []string
		e := effectiveOf(c.pod, c.container)
		if e.seccomp == nil || e.seccomp.Type != corev1.SeccompProfileTypeUnconfined {
			out = append(out, fmt.Sprintf("seccompProfile %v: the runtime's default profile refuses unshare, mount and clone3 to a container without CAP_SYS_ADMIN; want Unconfined", e.seccomp))
		}
		// Without a profile, the kubelet runs a container Unconfined.
		for _, ct := range others(c) {
			if e := effectiveOf(c.pod, ct); e.seccomp == nil || e.seccomp.Type == corev1.SeccompProfileTypeUnconfined {
				out = append(out, fmt.Sprintf("container %s runs without a seccomp profile: only cordon needs to (set RuntimeDefault on the pod)", ct.Name))
			}
		}
		return out
	}},
	{"apparmor", func(o *objects, c *ctx) []string {
		var out []string
		e := effectiveOf(c.pod, c.container)
		if e.apparmor == nil || e.apparmor.Type != corev1.AppArmorProfileTypeUnconfined {
			out = append(out, fmt.Sprintf("appArmorProfile %v: the runtime's default profile denies every mount; want Unconfined", e.apparmor))
		}
		for _, ct := range others(c) {
			if e := effectiveOf(c.pod, ct); e.apparmor != nil && e.apparmor.Type == corev1.AppArmorProfileTypeUnconfined {
				out = append(out, fmt.Sprintf("container %s runs without AppArmor: only cordon needs to", ct.Name))
			}
		}
		return out
	}},
	{"startup-probe", func(o *objects, c *ctx) []string {
		p := c.container.StartupProbe
		if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, []string{"cordon", "doctor"}) {
			return []string{"the startupProbe must run cordon doctor"}
		}
		// Generous: a doctor run builds a sandbox, and a node has minutes.
		if p.TimeoutSeconds < 10 || time.Duration(p.PeriodSeconds*p.FailureThreshold)*time.Second < 2*time.Minute {
			return []string{fmt.Sprintf("the startupProbe gives cordon doctor %ds a run and %ds in all; want at least 10s and 2m", p.TimeoutSeconds, p.PeriodSeconds*p.FailureThreshold)}
		}
		// A doctor in the container's cgroup before cordon serve moved
		// into its leaf takes the cgroup from both (README.md, "Cgroups
		// inside the pod").
		if p.InitialDelaySeconds < 10 {
			return []string{fmt.Sprintf("the startupProbe's first cordon doctor runs after %ds; want at least 10s, for cordon serve to have made its cgroup first", p.InitialDelaySeconds)}
		}
		return nil
	}},
	{"readiness-probe", func(o *objects, c *ctx) []string {
		return healthProbe("readinessProbe", c.container.ReadinessProbe)
	}},
	{"liveness-probe", func(o *objects, c *ctx) []string {
		out := healthProbe("livenessProbe", c.container.LivenessProbe)
		live, ready := c.container.LivenessProbe, c.container.ReadinessProbe
		if len(out) > 0 || ready == nil {
			return out
		}
		if live.FailureThreshold <= ready.FailureThreshold {
			out = append(out, fmt.Sprintf("livenessProbe.failureThreshold %d must be higher than the readinessProbe's %d", live.FailureThreshold, ready.FailureThreshold))
		}
		// A draining node answers 503 on purpose: the liveness probe must
		// not restart it meanwhile.
		if grace := c.pod.TerminationGracePeriodSeconds; grace != nil && int64(live.PeriodSeconds*live.FailureThreshold) <= *grace {
			out = append(out, fmt.Sprintf("the livenessProbe restarts a node silent for %ds, not longer than the %ds it may take to stop", live.PeriodSeconds*live.FailureThreshold, *grace))
		}
		return out
	}},
	{"resources", func(o *objects, c *ctx) []string {
		var out []string
		for _, ct := range allContainers(c.pod) {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
				req, okReq := ct.Resources.Requests[name]
				lim, okLim := ct.Resources.Limits[name]
				switch {
				case !okReq || !okLim:
					out = append(out, fmt.Sprintf("container %s: want a request and a limit of %s", ct.Name, name))
				case req.Cmp(lim) > 0:
					out = append(out, fmt.Sprintf("container %s: the %s request %s is above its limit %s", ct.Name, name, req.String(), lim.String()))
				}
			}
		}
		return out
	}},
	{"sizing", func(o *objects, c *ctx) []string {
		if c.loaded == nil {
			return []string{fmt.Sprintf("serve.yaml does not load: %v", c.loadErr)}
		}
		var out []string
		cfg := c.loaded
		need := float64(serveIdle) + float64(cfg.Commands.PerServer)*(perCommand+stdinDecoding*float64(cfg.Commands.Stdin))
		for name, a := range cfg.Agents {
			mem := a.Loaded.Resources.Memory
			if !mem.Set() {
				out = append(out, fmt.Sprintf("agent %s: its profile sets no memory limit, so no pod limit bounds its sandboxes", name))
				continue
			}
			need += float64(a.Pool)*perWarm + float64(a.MaxSandboxes)*(perIdle+float64(mem.N))
		}
		if lim, ok := c.container.Resources.Limits[corev1.ResourceMemory]; !ok || float64(lim.Value()) < need {
			out = append(out, fmt.Sprintf("the memory limit %s is below what the node may hold: %.0f MiB (cordon serve, its commands, each agent's max_sandboxes at its profile's memory)", lim.String(), need/mib))
		}
		// Under memory pressure the kubelet evicts first the pods past
		// their request, and an evicted node loses every sandbox.
		if req, lim := c.container.Resources.Requests[corev1.ResourceMemory], c.container.Resources.Limits[corev1.ResourceMemory]; req.Cmp(lim) != 0 {
			out = append(out, fmt.Sprintf("the memory request %s is not the limit %s: a machine short of memory evicts the node, and every sandbox on it, first", req.String(), lim.String()))
		}
		// The spool of outputs lives in the state directory.
		spool := int64(cfg.Commands.PerServer) * cfg.Commands.Output
		var emptyDirs int64
		for _, v := range c.pod.Volumes {
			if v.EmptyDir != nil {
				if v.EmptyDir.SizeLimit == nil {
					out = append(out, fmt.Sprintf("emptyDir %s has no sizeLimit", v.Name))
					continue
				}
				emptyDirs += v.EmptyDir.SizeLimit.Value()
			}
		}
		if st := stateVolume(c); st != nil && st.EmptyDir != nil && st.EmptyDir.SizeLimit != nil && st.EmptyDir.SizeLimit.Value() < 2*spool {
			out = append(out, fmt.Sprintf("the state emptyDir (%s) must hold the spool (per_server x max_output = %d MiB) and the workspaces", st.EmptyDir.SizeLimit.String(), spool/mib))
		}
		if lim, ok := c.container.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && lim.Value() <= emptyDirs {
			out = append(out, fmt.Sprintf("the ephemeral-storage limit %s does not hold the emptyDirs (%d MiB) and the logs", lim.String(), emptyDirs/mib))
		}
		return out
	}},
	{"env", func(o *objects, c *ctx) []string {
		var out []string
		ct := c.container
		fieldRef := func(name, path string) int {
			i, e := envOf(ct, name)
			if e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path || e.Value != "" {
				out = append(out, fmt.Sprintf("%s must come from the downward API's %s", name, path))
			}
			return i
		}
		node := fieldRef("CORDON_NODE", "metadata.name")
		ns := fieldRef("POD_NAMESPACE", "metadata.namespace")
		i, e := envOf(ct, "CORDON_ADVERTISE")
		switch {
		case e == nil || e.Value != advertise:
			out = append(out, fmt.Sprintf("CORDON_ADVERTISE must be %s", advertise))
		case node < 0 || ns < 0 || node > i || ns > i:
			out = append(out, "CORDON_NODE and POD_NAMESPACE must be defined before CORDON_ADVERTISE: Kubernetes expands only those")
		}
		if c.set.Spec.ServiceName != nodesService {
			out = append(out, fmt.Sprintf("the StatefulSet's serviceName %q is not %s, which CORDON_ADVERTISE names", c.set.Spec.ServiceName, nodesService))
		}
		fromSecret := func(name, key string) []byte {
			_, e := envOf(ct, name)
			if e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != key {
				out = append(out, fmt.Sprintf("%s must come from the Secret's key %s", name, key))
				return nil
			}
			ref := e.ValueFrom.SecretKeyRef
			if isTrue(ref.Optional) {
				out = append(out, fmt.Sprintf("%s is optional: a node must not start without it", name))
			}
			for _, s := range o.secrets {
				if s.Name == ref.Name {
					if v, ok := s.Data[key]; ok {
						return v
					}
				}
			}
			out = append(out, fmt.Sprintf("%s names Secret %s key %s, which the kustomization does not make", name, ref.Name, key))
			return nil
		}
		if db := fromSecret("CORDON_DATABASE", secretDB); db != nil && !strings.HasPrefix(string(db), "postgres://") {
			out = append(out, "the database URL is not a postgres:// URL")
		}
		if cs := fromSecret("CORDON_CLUSTER_SECRET", secretCluster); cs != nil && len(cs) < 32 {
			out = append(out, fmt.Sprintf("the cluster secret has %d bytes, want at least 32", len(cs)))
		}
		return out
	}},
	{"grace", func(o *objects, c *ctx) []string {
		grace, err := drainGrace(c)
		if err != nil {
			return []string{fmt.Sprintf("serve.yaml's drain_grace: %v", err)}
		}
		if c.loaded != nil && c.loaded.Grace != grace {
			return []string{fmt.Sprintf("serve.yaml's drain_grace reads %s here, %s in cordon's loader", grace, c.loaded.Grace)}
		}
		tg := c.pod.TerminationGracePeriodSeconds
		if tg == nil {
			return []string{"terminationGracePeriodSeconds unset: the kubelet's default (30s) is no longer than a drain"}
		}
		if time.Duration(*tg)*time.Second < grace+stopAfterDrain {
			return []string{fmt.Sprintf("terminationGracePeriodSeconds %d must be at least drain_grace %s and %s more, to end the sandboxes, seal the audit log and leave the registry: the kubelet would kill a draining node", *tg, grace, stopAfterDrain)}
		}
		return nil
	}},
	{"command", func(o *objects, c *ctx) []string {
		want := []string{"cordon", "serve", "--config", configPath}
		if got := append(slices.Clone(c.container.Command), c.container.Args...); !slices.Equal(got, want) {
			return []string{fmt.Sprintf("the container runs %q, want %q", got, want)}
		}
		if m := mountAt(c.container, configPath); m == nil || m.SubPath != "serve.yaml" || !isConfigVolume(c.pod, m.Name) {
			return []string{fmt.Sprintf("%s must be the ConfigMap's serve.yaml", configPath)}
		}
		return nil
	}},
	{"config-mounts", func(o *objects, c *ctx) []string {
		if c.config == nil {
			return []string{"no ConfigMap volume named config"}
		}
		var out []string
		mounted := map[string]bool{}
		for _, m := range c.container.VolumeMounts {
			if !isConfigVolume(c.pod, m.Name) {
				continue
			}
			if m.SubPath == "" {
				out = append(out, fmt.Sprintf("the ConfigMap is mounted whole at %s: its files are symbolic links there, which cordon refuses; mount each key with subPath", m.MountPath))
				continue
			}
			if !m.ReadOnly {
				out = append(out, fmt.Sprintf("%s is mounted writable", m.MountPath))
			}
			if _, ok := c.config.Data[m.SubPath]; !ok {
				out = append(out, fmt.Sprintf("%s mounts key %s, which the ConfigMap lacks", m.MountPath, m.SubPath))
			}
			mounted[m.SubPath] = true
		}
		for key := range c.config.Data {
			if !mounted[key] {
				out = append(out, fmt.Sprintf("the ConfigMap's %s is mounted nowhere", key))
			}
		}
		if v := volume(c.pod, "config"); v != nil && v.ConfigMap != nil && v.ConfigMap.DefaultMode != nil && *v.ConfigMap.DefaultMode&0o222 != 0 {
			out = append(out, fmt.Sprintf("the ConfigMap's files are writable (mode %o)", *v.ConfigMap.DefaultMode))
		}
		// Every agent's profile is where serve.yaml says, through the
		// mounts: the loader reads them from the laid-out tree.
		if c.loaded == nil {
			out = append(out, fmt.Sprintf("serve.yaml and its profiles, as mounted, do not load: %v", c.loadErr))
		}
		return out
	}},
	{"serve-yaml", func(o *objects, c *ctx) []string {
		var out []string
		if c.serve == nil {
			return []string{"no serve.yaml"}
		}
		if l := c.serve["listen"]; l != fmt.Sprintf("0.0.0.0:%d", apiPort) {
			out = append(out, fmt.Sprintf("listen %v, want 0.0.0.0:%d (every address of the pod)", l, apiPort))
		}
		if g := c.serve["drain_grace"]; g != "30s" {
			out = append(out, fmt.Sprintf("drain_grace %v, want 30s", g))
		}
		cl, _ := c.serve["cluster"].(map[string]any)
		want := map[string]any{"heartbeat": "2s", "node_timeout": "15s"}
		if !reflect.DeepEqual(cl, want) {
			out = append(out, fmt.Sprintf("cluster: %v, want exactly %v", cl, want))
		}
		for _, k := range []string{"database", "node"} {
			if _, ok := c.serve[k]; ok {
				out = append(out, fmt.Sprintf("serve.yaml sets %s: it comes from the pod (CORDON_DATABASE, CORDON_NODE)", k))
			}
		}
		// docs/SERVER.md, "What each node needs": a node's forwarded
		// requests all come from its one address.
		if h := c.loaded; h != nil && h.HTTP.MaxConnectionsPerRemote != h.HTTP.MaxConnections {
			out = append(out, fmt.Sprintf("http.max_connections_per_remote %d, want max_connections (%d): the requests a node forwards all come from its address", h.HTTP.MaxConnectionsPerRemote, h.HTTP.MaxConnections))
		}
		return out
	}},
	{"services", func(o *objects, c *ctx) []string {
		var out []string
		labels := c.set.Spec.Template.Labels
		if c.set.Spec.Selector == nil || !selects(c.set.Spec.Selector.MatchLabels, labels) {
			out = append(out, "the StatefulSet's selector does not match its pods")
		}
		port := false
		for _, p := range c.container.Ports {
			port = port || p.ContainerPort == apiPort
		}
		if !port {
			out = append(out, fmt.Sprintf("the container exposes no port %d", apiPort))
		}
		for _, name := range []string{nodesService, apiService} {
			s := serviceNamed(o, name)
			if s == nil {
				out = append(out, fmt.Sprintf("no Service %s", name))
				continue
			}
			if !selects(s.Spec.Selector, labels) {
				out = append(out, fmt.Sprintf("Service %s does not select the nodes", name))
			}
			if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != apiPort || s.Spec.Ports[0].TargetPort != intstr.FromInt32(apiPort) {
				out = append(out, fmt.Sprintf("Service %s: want port %d to the pods' %d", name, apiPort, apiPort))
			}
		}
		if s := serviceNamed(o, nodesService); s != nil {
			if s.Spec.ClusterIP != corev1.ClusterIPNone {
				out = append(out, fmt.Sprintf("Service %s must be headless (clusterIP: None): each pod needs its own DNS name", nodesService))
			}
			if !s.Spec.PublishNotReadyAddresses {
				out = append(out, fmt.Sprintf("Service %s must publish not-ready addresses: a starting or draining node's name must resolve", nodesService))
			}
		}
		if s := serviceNamed(o, apiService); s != nil && (s.Spec.ClusterIP == corev1.ClusterIPNone || (s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP)) {
			out = append(out, fmt.Sprintf("Service %s must be a ClusterIP Service", apiService))
		}
		// An MCP session lives in the memory of the node that opened it:
		// a client must stay on one node for longer than the session may
		// sit idle.
		if s := serviceNamed(o, apiService); s != nil {
			timeout := int32(corev1.DefaultClientIPServiceAffinitySeconds)
			if cfg := s.Spec.SessionAffinityConfig; cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil {
				timeout = *cfg.ClientIP.TimeoutSeconds
			}
			if s.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || time.Duration(timeout)*time.Second < mcpSessionIdle {
				out = append(out, fmt.Sprintf("Service %s must keep a client on one node (sessionAffinity ClientIP, at least %s): another node answers an MCP session's requests 404", apiService, mcpSessionIdle))
			}
		}
		return out
	}},
	{"volumes", func(o *objects, c *ctx) []string {
		var out []string
		_, audit := envOf(c.container, "CORDON_AUDIT_LOG")
		_, state := envOf(c.container, "CORDON_STATE_DIR")
		if audit == nil || state == nil {
			return []string{"CORDON_AUDIT_LOG and CORDON_STATE_DIR must be set"}
		}
		claim := false
		if m := mountAt(c.container, path.Dir(audit.Value)); m != nil {
			for _, t := range c.set.Spec.VolumeClaimTemplates {
				claim = claim || t.Name == m.Name
			}
		}
		if !claim {
			out = append(out, fmt.Sprintf("the audit log %s must be on a volumeClaimTemplate's volume: on an emptyDir it is lost with the pod", audit.Value))
		}
		if p := c.set.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			out = append(out, "the audit logs' volumes must be retained when the StatefulSet is deleted or scaled down")
		}
		if st := stateVolume(c); st == nil || st.EmptyDir == nil {
			out = append(out, fmt.Sprintf("the state directory %s must be an emptyDir of its own", state.Value))
		}
		return out
	}},
	{"writable-paths", func(o *objects, c *ctx) []string {
		// With a read-only root, cordon writes only volumes.
		var out []string
		for _, dir := range []string{"/tmp", c.container.WorkingDir} {
			if m := mountAt(c.container, dir); m == nil || m.ReadOnly || isConfigVolume(c.pod, m.Name) {
				out = append(out, fmt.Sprintf("%s must be a writable volume", dir))
			}
		}
		return out
	}},
	{"runtime-class", func(o *objects, c *ctx) []string {
		name := c.pod.RuntimeClassName
		for _, rc := range o.runtime {
			if name != nil && rc.Name == *name {
				if rc.Handler == "" || rc.Scheduling == nil || len(rc.Scheduling.NodeSelector) == 0 {
					return []string{fmt.Sprintf("RuntimeClass %s must name its handler and the machines that have it", rc.Name)}
				}
				if c.set.Spec.Template.Annotations["io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw"] != "true" {
					return []string{"the pods must ask CRI-O for a writable cgroup tree"}
				}
				return nil
			}
		}
		return []string{fmt.Sprintf("the pods' runtimeClassName %v names no RuntimeClass of the kustomization", name)}
	}},
	{"disruption-budget", func(o *objects, c *ctx) []string {
		for _, b := range o.budgets {
			if b.Spec.Selector != nil && selects(b.Spec.Selector.MatchLabels, c.set.Spec.Template.Labels) && b.Spec.MaxUnavailable != nil && b.Spec.MaxUnavailable.IntValue() == 1 {
				if p := b.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
					return []string{"the PodDisruptionBudget must let a node that is not ready be evicted (unhealthyPodEvictionPolicy: AlwaysAllow): otherwise one never ready blocks draining the machines of the others"}
				}
				return nil
			}
		}
		return []string{"want a PodDisruptionBudget of the nodes with maxUnavailable 1"}
	}},
	{"network-policy", func(o *objects, c *ctx) []string {
		var mine []*networkingv1.NetworkPolicy
		for _, p := range o.policies {
			if selects(p.Spec.PodSelector.MatchLabels, c.set.Spec.Template.Labels) {
				mine = append(mine, p)
			}
		}
		if len(mine) != 1 {
			return []string{fmt.Sprintf("want one NetworkPolicy of the nodes, found %d", len(mine))}
		}
		p := mine[0].Spec
		var out []string
		if !slices.Contains(p.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(p.PolicyTypes, networkingv1.PolicyTypeEgress) {
			out = append(out, fmt.Sprintf("the NetworkPolicy governs %v; want Ingress and Egress", p.PolicyTypes))
		}
		// In: the API's port, and only it.
		api := false
		for _, r := range p.Ingress {
			if len(r.Ports) == 0 {
				api = true
				out = append(out, fmt.Sprintf("an ingress rule opens every port: name %d", apiPort))
			}
			for _, pt := range r.Ports {
				if pt.Port == nil || *pt.Port != intstr.FromInt32(apiPort) || pt.EndPort != nil || (pt.Protocol != nil && *pt.Protocol != corev1.ProtocolTCP) {
					out = append(out, fmt.Sprintf("an ingress rule opens %v: only TCP %d is served", portString(pt), apiPort))
				} else {
					api = true
				}
			}
		}
		if !api {
			out = append(out, fmt.Sprintf("no ingress rule lets clients and the other nodes reach TCP %d", apiPort))
		}
		// Out: names, the other nodes, never the metadata service.
		dns, nodes := false, false
		for _, r := range p.Egress {
			if egressPort(r, corev1.ProtocolUDP, 53) && len(r.To) == 0 {
				dns = true
			}
			if egressPort(r, corev1.ProtocolTCP, apiPort) && (len(r.To) == 0 || slices.ContainsFunc(r.To, func(peer networkingv1.NetworkPolicyPeer) bool {
				return peerSelects(peer, c.set.Namespace, c.set.Spec.Template.Labels)
			})) {
				nodes = true
			}
			if !egressPort(r, corev1.ProtocolTCP, 80) {
				continue
			}
			if len(r.To) == 0 {
				out = append(out, "an egress rule opens every address, the cloud's metadata service among them")
				continue
			}
			for _, peer := range r.To {
				for _, meta := range metadataAddrs {
					if peer.IPBlock != nil && ipBlockHas(peer.IPBlock, meta) {
						out = append(out, fmt.Sprintf("egress to %s is open (ipBlock %s): the cloud's metadata service hands out the machine's credentials", meta, peer.IPBlock.CIDR))
					}
				}
			}
		}
		if !dns {
			out = append(out, "no egress rule lets the nodes resolve names (UDP 53)")
		}
		if !nodes {
			out = append(out, fmt.Sprintf("no egress rule lets a node reach the others on TCP %d, to forward", apiPort))
		}
		return out
	}},
	{"selinux", func(o *objects, c *ctx) []string {
		// The types a container runtime's policy confines (and the one
		// meant for an engine in a container, README.md); spc_t and
		// unconfined_t are not confined at all.
		confined := []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
		var out []string
		check := func(who string, s *corev1.SELinuxOptions) {
			if s != nil && !slices.Contains(confined, s.Type) {
				out = append(out, fmt.Sprintf("%s runs as SELinux type %s, which the runtime's policy does not confine", who, s.Type))
			}
		}
		if c.pod.SecurityContext != nil {
			check("the pod", c.pod.SecurityContext.SELinuxOptions)
		}
		for _, ct := range allContainers(c.pod) {
			if ct.SecurityContext != nil {
				check("container "+ct.Name, ct.SecurityContext.SELinuxOptions)
			}
		}
		return out
	}},
	{"secrets", func(o *objects, c *ctx) []string {
		// cordon serve takes its secrets from these two variables and
		// unsets them before it starts anything; anything else of the
		// Secret would reach what cordon starts, or a file.
		want := map[string]string{"CORDON_DATABASE": secretDB, "CORDON_CLUSTER_SECRET": secretCluster}
		var out []string
		for _, ct := range allContainers(c.pod) {
			for _, ef := range ct.EnvFrom {
				if ef.SecretRef != nil {
					out = append(out, fmt.Sprintf("container %s takes every key of Secret %s as variables", ct.Name, ef.SecretRef.Name))
				}
			}
			for _, e := range ct.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				if key, ok := want[e.Name]; !ok || ct != c.container || e.ValueFrom.SecretKeyRef.Key != key {
					out = append(out, fmt.Sprintf("container %s: %s comes from a Secret; only cordon's CORDON_DATABASE and CORDON_CLUSTER_SECRET may", ct.Name, e.Name))
				}
			}
		}
		for _, v := range c.pod.Volumes {
			if v.Secret != nil {
				out = append(out, fmt.Sprintf("volume %s is Secret %s", v.Name, v.Secret.SecretName))
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.Secret != nil {
						out = append(out, fmt.Sprintf("volume %s projects Secret %s", v.Name, src.Secret.Name))
					}
				}
			}
		}
		return out
	}},
	{"sandbox-view", func(o *objects, c *ctx) []string {
		// What the pod mounts stays out of what the agents' sandboxes
		// see of it: their profiles' mounts.
		if c.loaded == nil {
			return []string{fmt.Sprintf("serve.yaml does not load: %v", c.loadErr)}
		}
		var out []string
		for _, name := range slices.Sorted(maps.Keys(c.loaded.Agents)) {
			p := c.loaded.Agents[name].Loaded
			var views []string
			for _, m := range p.Mounts {
				views = append(views, path.Clean(m.Path))
			}
			if ws := p.Workspace.Path; path.IsAbs(ws) {
				views = append(views, path.Clean(ws))
			}
			for _, ct := range allContainers(c.pod) {
				for _, m := range ct.VolumeMounts {
					mp := path.Clean(m.MountPath)
					for _, v := range views {
						if within(mp, v) || within(v, mp) {
							out = append(out, fmt.Sprintf("container %s mounts volume %s at %s, and agent %s's sandboxes see %s", ct.Name, m.Name, mp, name, v))
						}
					}
				}
			}
		}
		return out
	}},
	{"image", func(o *objects, c *ctx) []string {
		img := c.container.Image
		if !strings.Contains(img, "/") || !strings.Contains(img[strings.LastIndex(img, "/"):], ":") {
			return []string{fmt.Sprintf("image %q: kustomization.yaml's images: must name a registry and a tag", img)}
		}
		return nil
	}},
}

// peerSelects reports whether a NetworkPolicy peer takes in the pods of
// namespace ns with the given labels.
func peerSelects(peer networkingv1.NetworkPolicyPeer, ns string, labels map[string]string) bool {
	if peer.IPBlock != nil {
		return false
	}
	if sel := peer.NamespaceSelector; sel != nil && (len(sel.MatchExpressions) > 0 || len(sel.MatchLabels) > 0 && !selects(sel.MatchLabels, map[string]string{"kubernetes.io/metadata.name": ns})) {
		return false
	}
	sel := peer.PodSelector
	return sel == nil || len(sel.MatchExpressions) == 0 && (len(sel.MatchLabels) == 0 || selects(sel.MatchLabels, labels))
}

// metadataAddrs are the cloud instance metadata services' addresses.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// ipBlockHas reports whether b lets traffic reach a.
func ipBlockHas(b *networkingv1.IPBlock, a netip.Addr) bool {
	in := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && p.Contains(a)
	}
	if !in(b.CIDR) {
		return false
	}
	return !slices.ContainsFunc(b.Except, in)
}

// egressPort reports whether rule r lets traffic out to protocol and port.
func egressPort(r networkingv1.NetworkPolicyEgressRule, protocol corev1.Protocol, port int32) bool {
	if len(r.Ports) == 0 {
		return true
	}
	for _, p := range r.Ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.Int && p.EndPort != nil:
			if p.Port.IntVal <= port && port <= *p.EndPort {
				return true
			}
		case *p.Port == intstr.FromInt32(port):
			return true
		}
	}
	return false
}

func portString(p networkingv1.NetworkPolicyPort) string {
	s := "every port"
	if p.Port != nil {
		s = "port " + p.Port.String()
	}
	if p.EndPort != nil {
		s += fmt.Sprintf("-%d", *p.EndPort)
	}
	if p.Protocol != nil {
		s = string(*p.Protocol) + " " + s
	}
	return s
}

// within reports whether path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// others are the pod's containers but cordon's.
func others(c *ctx) []*corev1.Container {
	return slices.DeleteFunc(allContainers(c.pod), func(ct *corev1.Container) bool { return ct == c.container })
}

func stateVolume(c *ctx) *corev1.Volume {
	_, state := envOf(c.container, "CORDON_STATE_DIR")
	if state == nil {
		return nil
	}
	if m := mountAt(c.container, state.Value); m != nil {
		return volume(c.pod, m.Name)
	}
	return nil
}

func healthProbe(name string, p *corev1.Probe) []string {
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != healthPath || p.HTTPGet.Port != intstr.FromInt32(apiPort) {
		return []string{fmt.Sprintf("the %s must GET %s on port %d", name, healthPath, apiPort)}
	}
	if p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP {
		return []string{fmt.Sprintf("the %s speaks %s; cordon serve speaks HTTP", name, p.HTTPGet.Scheme)}
	}
	return nil
}
