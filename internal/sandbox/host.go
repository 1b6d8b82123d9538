package sandbox

// Host is what this host supports, as far as cordon is concerned.
type Host struct {
	Kernel string `json:"kernel"`
	Arch   string `json:"arch"`
	Root   bool   `json:"root"`
	UID    int    `json:"uid"`
	// UserNamespaces is empty when cordon can create its namespaces here,
	// and says why not otherwise.
	UserNamespaces string `json:"user_namespaces_error,omitempty"`
	LandlockABI    int    `json:"landlock_abi"`
	Seccomp        string `json:"seccomp_error,omitempty"`
	SeccompNotify  bool   `json:"seccomp_user_notification"`
	Cgroup         Cgroup `json:"cgroup"`
	// SandboxProgram is what each sandbox's init runs:
	// "lean" (the program cordon carries, see sandbox/lean) or "cordon"
	// (a build without it); an error when the lean one cannot be used.
	SandboxProgram string `json:"sandbox_program"`
}

// Cgroup describes the cgroup hierarchy of the host.
type Cgroup struct {
	// Version is "v2", "v1", "hybrid" or "none".
	Version string `json:"version"`
	// V1Controllers are the mounted v1 controllers.
	V1Controllers []string `json:"v1_controllers,omitempty"`
	// V2Controllers are the controllers available in cordon's own v2 cgroup.
	V2Controllers []string `json:"v2_controllers,omitempty"`
	// Delegated reports whether cordon may create the cgroups it needs.
	Delegated bool `json:"delegated"`
	// Using is the version cordon uses, "v1" or "v2".
	Using string `json:"using,omitempty"`
	// Problem says why cgroups cannot be used.
	Problem string `json:"problem,omitempty"`
}
