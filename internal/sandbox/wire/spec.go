// Package wire is what cordon's host side and the sandbox init say to each
// other: the Spec init is started with, the Status messages it answers
// with, the Requests of a kept-alive sandbox, the descriptors they pass and
// the fixed descriptor numbers. It is shared by the sandbox package and by
// init, which imports nothing of the host side's.
package wire

import (
	"fmt"
	"os"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/protect"
)

// Spec is everything the sandbox init needs, computed on the host side. It
// reaches init on a pipe (see WriteSpec), never through paths the sandbox
// could change. Its JSON form is for cordon's tests and traces.
type Spec struct {
	Hostname string  `json:"hostname"`
	UserName string  `json:"user_name"`
	UID      int     `json:"uid"` // inside the sandbox
	GID      int     `json:"gid"`
	Home     string  `json:"home"`
	Mounts   []Mount `json:"mounts"`
	TmpSize  int64   `json:"tmp_size"`
	// Rlimits are set on init and inherited by the command; 0 leaves one
	// as it is.
	Rlimits Rlimits  `json:"rlimits"`
	Workdir string   `json:"workdir"`
	Env     []string `json:"env"`
	Args    []string `json:"args"`
	// Path is the PATH used to find Args[0].
	Path string `json:"path"`
	// SelfExec runs cordon itself as the command (Args[1] is a hidden
	// subcommand, e.g. the escape probes), from init's sealed copy, so the
	// sandbox needs no path to any cordon binary.
	SelfExec bool `json:"self_exec,omitempty"`
	// Weaken is only ever set by test builds.
	Weaken Weakenings `json:"weaken,omitempty"`
	// Landlock and Seccomp are false only when the user allowed running
	// without that layer.
	Landlock bool `json:"landlock"`
	Seccomp  bool `json:"seccomp"`
	TTY      bool `json:"tty"`
	// ProxyAddr is where init listens for the proxy inside the sandbox
	// (127.0.0.1:3128); empty without network.
	ProxyAddr string `json:"proxy_addr,omitempty"`
	// Transparent also captures TCP to any outside address and answers DNS
	// at DNSAddr (see nsinit).
	Transparent bool `json:"transparent,omitempty"`
	// GitIgnore, when set, is written to GitIgnoreFile: the placeholders
	// of the workspace's root, which git would otherwise take for
	// untracked directories (and git clean fail to remove).
	GitIgnore string `json:"git_ignore,omitempty"`
	// Placeholders, when set, are written to PlaceholdersFile: the
	// identities of the placeholders of every writable bind, which
	// cordon's own listings inside leave out.
	Placeholders []protect.ID `json:"placeholders,omitempty"`
	// Layer is set when the workspace is reviewed (Mount.Review).
	Layer *Layer `json:"layer,omitempty"`
	// Serve keeps the sandbox alive: instead of starting Args, init waits
	// for Requests on ControlFD and runs each command it is sent, until the
	// host side closes the socket.
	Serve bool `json:"serve,omitempty"`
}

// Tags of the descriptors init passes on ProxyFD.
const (
	TagProxy       byte = 0 // a connection to ProxyAddr
	TagTransparent byte = 1 // a redirected connection; SO_ORIGINAL_DST tells where to
	TagDNS         byte = 2 // the UDP socket DNS queries arrive on
)

// Addresses inside the sandbox in transparent mode.
const (
	TransparentPort = 3129
	DNSAddr         = "127.0.0.53:53"
)

// Rlimits are the per-process limits: CPU seconds, the largest file
// written, open descriptors, and (when no cgroup counts them) processes.
type Rlimits struct {
	CPUSeconds int64 `json:"cpu_seconds,omitempty"`
	FileSize   int64 `json:"file_size,omitempty"`
	OpenFiles  int64 `json:"open_files,omitempty"`
	Processes  int64 `json:"processes,omitempty"`
	// Data bounds each process's data (RLIMIT_DATA), for memory when no
	// cgroup counts the whole sandbox.
	Data int64 `json:"data,omitempty"`
}

// Mount is one bind mount of a host path.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Writable bool   `json:"writable,omitempty"`
	Optional bool   `json:"optional,omitempty"`
	// Device marks the /dev nodes cordon binds; they keep device access.
	Device bool `json:"device,omitempty"`
	// Tree is the fd number, in init, of a detached mount the host side
	// prepared; 0 when init opens Source itself.
	Tree int `json:"tree,omitempty"`
	// Link is set instead of Tree when the host side found a symlink.
	Link string `json:"link,omitempty"`
	// Missing is set when an optional source does not exist.
	Missing bool `json:"missing,omitempty"`
	// Protect are the paths of a writable bind that init binds onto
	// themselves, read-only or pinned in place, shallow first.
	Protect []protect.Entry `json:"protect,omitempty"`
	// Mask are paths of a read-only bind, relative to it, that init covers
	// with an empty read-only file or directory: credentials found in a
	// toolchain's prefix. None is a symbolic link.
	Mask []string `json:"mask,omitempty"`
	// Review marks the workspace of a reviewed run: the source is bound
	// read-only as the lower layer of an overlay whose writes go to a
	// layer of the sandbox's own (see Spec.Layer).
	Review bool `json:"review,omitempty"`
}

// Layer bounds the copy-on-write layer of a reviewed workspace: a tmpfs of
// Size bytes and Inodes files, directories and links; or, for a guarded
// workspace, the host directory the host side opened (Tree), on disk,
// which the host side bounds by watching it.
type Layer struct {
	Size   int64 `json:"size"`
	Inodes int64 `json:"inodes"`
	// Dir is the host directory that holds a guarded workspace's layer;
	// "" for a tmpfs of init's own. Tree is the fd number, in init, of a
	// detached mount of it the host side prepared (as root); 0 when init
	// opens Dir itself.
	Dir  string `json:"dir,omitempty"`
	Tree int    `json:"tree,omitempty"`
	// Free is what the host side measured free on Dir's file system when
	// the run began: blocks (of its size) and inodes.
	Free *[2]uint64 `json:"-"`
}

// Fixed descriptor numbers in init.
const (
	SpecFD   = 3 // the Spec (WriteSpec), then Placed
	StatusFD = 4 // init's Status messages, JSON lines
	// ConsoleFD is a unix socket on which init sends back the master of the
	// pseudo-terminal it allocates when TTY is set; closed otherwise.
	ConsoleFD = 5
	// ProxyFD is a unix socket on which init passes each connection made to
	// the proxy's address inside the sandbox; closed without network.
	ProxyFD = 6
	// LayerFD is a unix socket on which init sends back a descriptor of
	// the root of a reviewed workspace's layer (holding LayerUpper and
	// LayerWork), once the overlay is in place; closed otherwise.
	LayerFD = 7
	// SelfFD is a sealed copy of cordon, which init starts for a command
	// that is cordon itself (SelfExec, or a Request's); closed otherwise.
	SelfFD  = 8
	FirstFD = 9 // detached mounts
)

// Directories of a reviewed workspace's layer.
const (
	LayerUpper = "upper"
	LayerWork  = "work"
)

// Hidden arguments: the sandbox's own processes are started with one of
// them as their first argument.
const (
	// InitArg runs the sandbox init.
	InitArg = "__init"
	// HoldArg waits for stdin to close; it holds namespaces open.
	HoldArg = "__hold"
)

// Status is one message from init to the host side.
type Status struct {
	// Event is "error" (setup failed), "started", "exec-error" or "exit";
	// a kept-alive sandbox's init says "ready" when it waits for requests.
	Event string `json:"event"`
	// ID is the Request a message of a kept-alive sandbox answers.
	ID    uint64 `json:"id,omitempty"`
	Stage string `json:"stage,omitempty"`
	Error string `json:"error,omitempty"`
	// Code is the exit code for "exit", and 126 or 127 for "exec-error".
	Code        int `json:"code,omitempty"`
	Signal      int `json:"signal,omitempty"`
	LandlockABI int `json:"landlock_abi,omitempty"`
	// Pid is the command's, in the sandbox: for "started", and for the
	// "exit" of a kept-alive sandbox's command (also its process group).
	Pid  int    `json:"pid,omitempty"`
	Note string `json:"note,omitempty"`
	// TmpUsed is, at exit, the most bytes used in any of the size-capped
	// file systems (/tmp, /dev/shm, home).
	TmpUsed int64 `json:"tmp_used,omitempty"`
	// OtherSignal is, at exit, a limit's signal (SIGXFSZ, SIGXCPU) that
	// killed a process init reaped other than the command.
	OtherSignal int `json:"other_signal,omitempty"`
}

// EnvValue is name's value in env (the last one, as a process reading env
// sees it), "" when unset.
func EnvValue(env []string, name string) string {
	value := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			value = v
		}
	}
	return value
}

// SetEnv sets name in env, replacing an earlier value; env is not
// changed.
func SetEnv(env []string, name, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// PathOf is the value of PATH in env, "" without one.
func PathOf(env []string) string { return EnvValue(env, "PATH") }

// Placed is what cordon writes after the spec once init is in its cgroups.
const Placed = "placed\n"

// GitIgnoreFile is where init writes Spec.GitIgnore, the git excludes
// file the sandbox's git reads (core.excludesFile, set in its
// environment).
const GitIgnoreFile = "/etc/cordon-gitignore"

// PlaceholdersFile is where init writes Spec.Placeholders, one "DEV INO" a
// line, for cordon's own listings in the sandbox (the server's files list
// and tar download, the gateway's list_files) to leave them out.
const PlaceholdersFile = "/etc/cordon-placeholders"

// PlaceholdersText is the content of PlaceholdersFile for ids.
func PlaceholdersText(ids []protect.ID) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d %d\n", id.Dev, id.Ino)
	}
	return b.String()
}

// ReadPlaceholders reads PlaceholdersFile, inside a sandbox: the
// identities of cordon's placeholders there, none when it has none.
func ReadPlaceholders() map[protect.ID]bool {
	b, err := os.ReadFile(PlaceholdersFile)
	if err != nil {
		return nil
	}
	ids := map[protect.ID]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		var id protect.ID
		if n, _ := fmt.Sscanf(line, "%d %d", &id.Dev, &id.Ino); n == 2 {
			ids[id] = true
		}
	}
	return ids
}

// Weakenings are layers a test build (tag cordon_weaken) leaves out; always
// empty in cordon itself.
type Weakenings struct {
	NetNS       bool `json:"netns,omitempty"`
	UsernsLimit bool `json:"userns_limit,omitempty"`
	Caps        bool `json:"caps,omitempty"`
	ProcMasks   bool `json:"proc_masks,omitempty"`
	IPCNS       bool `json:"ipcns,omitempty"`
	Dumpable    bool `json:"dumpable,omitempty"`
	FDs         bool `json:"fds,omitempty"`
	UTSNS       bool `json:"utsns,omitempty"`
	NNP         bool `json:"nnp,omitempty"`
	// InitSignals leaves init's signals to the Go runtime's defaults, and
	// the command's output on init's own descriptors.
	InitSignals bool `json:"init_signals,omitempty"`
	// UserLimits gives the sandbox the whole per-user quotas (inotify,
	// fanotify, message queue bytes, queued signals) of its user
	// namespace's owner, not a share.
	UserLimits bool `json:"user_limits,omitempty"`
	// Refer leaves the root writable and grants Landlock's every right,
	// moving and linking files included, beneath it.
	Refer bool `json:"refer,omitempty"`
}
