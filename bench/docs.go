package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// bar is one median start-up time, for the plot.
type bar struct {
	payload string
	tool    string
	d       time.Duration
}

const docsIntro = `# Benchmarks

cordon against the sandboxes people would use instead, measured on one
machine in one run: every tool is started in turn, round after round, so
that a noisy host slows them all alike. Run it yourself:

` + "```sh\nbench/run            # installs bubblewrap, firejail and sandbox-runtime, builds cordon, measures\nbench/run -short     # a quick pass that proves the harness works (CI runs this)\nbench/run -docs      # also rewrites this file and the plot from the results\nbench/run -only startup  # only the start-up tables, with each process's faults and memory\nbench/run -only idle     # memory per idle sandbox; -only many: sandboxes started together; -only serve\nbench/run -only guarded  # a guarded workspace against a direct one on real work (with -docs, rewrites only its section)\nbench/run -only loop     # go test and npm ci on the host, in cordon with its caches, in bwrap (with -docs, rewrites only its section)\n```" + `

What is compared: bare exec; ` + "`unshare -Upmnif --mount-proc`" + ` (the
namespaces alone); bubblewrap with an equivalent view (system directories
read-only, the workspace read-write, new /proc, /dev and /tmp, no network,
no capabilities), and again inside a cgroup made for the run with the
memory and process limits of cordon's default profile, as one would give it
limits (` + "`bwrap+cgroup`" + `); firejail without a profile, with no network, a private
/tmp, no capabilities, no_new_privs and its seccomp filter; Anthropic's
sandbox-runtime (` + "`srt`" + `); and cordon on its default profile with every
layer on, and again with the egress proxy on. None of the peers sets
resource limits by itself or keeps an audit log; cordon always does both,
and both are in its figures.

Beside the time, each start-up row shows what a run touches: its minor
page faults (from the rusage of the tool's process tree, the orphans it
leaves included) and its memory (the peak resident memory of each of its
processes, summed). The harness then runs each tool traced (ptrace,
stopping a process only as it starts another, execs and exits) and lists
every process with its own figures, read as it exits: where a host makes
touching memory slow, these figures, not the time on a quiet machine, say
what start-up will cost. On this machine a cordon run of /bin/true took
about 3,800 minor faults and 65 MiB of touched memory while its init and
cleanup helper were cordon itself, each a Go runtime carrying every
package of the CLI (about 1,000 faults and 19 MiB each). They now run
cordon's lean sandbox program (internal/sandbox/lean, about 250 faults and
3.5 MiB each, a copy shared by every sandbox of the host), and a run takes
about 2,100 faults and 37 MiB. The cleanup helper that ran beside each
sandbox (a second process of the lean program, about 230 faults and 3.4
MiB) is gone: cordon writes what it makes on the host to a journal before
making it, and the next cordon to start removes what a killed one left.
Since then the start has been made leaner: the Spec reaches init in a
binary encoding of cordon's own, and init reports without reflection; the
embedded default profile is Go code generated from its YAML, not parsed at
every start; the catalog of what host tools obey, and its patterns, are
built when first used, not by every process (init included) as it starts;
no package of cordon's uses encoding/gob any more (init no longer
initialises it). A run of /bin/true went from about 2,400 to 1,850 minor
faults, the CLI from 1,700 to 1,470, init from 620 to 380. What is left is
mostly the CLI's own Go runtime and package initialisers, and on a host
whose /run is not a tmpfs (this one) a compare of the shared sandbox
program's 3.7 MB with the embedded one at every run (on a tmpfs it is
vouched for once a boot). Side by side on this machine, on a day its page faults were
slow (30 interleaved rounds): /bin/true took 96.6 ms with init and the
helper as cordon itself, 73.1 ms with the lean program, bwrap 13.6 ms. A cordon built with a plain ` + "`go build`" + ` (no lean program) still
runs like before.

The harness times each run itself rather than through hyperfine, which
runs all of one command's rounds before the next command's: here every
round starts each tool once, in a new random order.

Where cordon's time goes (16-22 ms for /bin/true on this machine,
traced with timestamps from each stage, perf and strace): cordon's own Go
runtime and flags (1-2 ms), the profile and the audit log (0.3-1.5 ms),
resolving the command's toolchains (about 1 ms), the audit log's start
records (about 1 ms), the spec, the caches and the cgroup (1-2 ms, with
its journal record), opening the idmapped binds and the helper holding
their user namespace (1.3-2.8 ms; none when the workspace belongs to a
user), the clone of init into seven namespaces and its cgroups (about 2
ms, a full fork because of the user namespace, not a vfork), init's Go
runtime (1-1.5 ms), building the root (3-4 ms: proc, dev, about 25 bind
mounts, the /proc masks), confinement (about 1 ms), the command and the
teardown of the namespaces (1.5-2 ms), the cgroup's removal and the walk
of the agent's caches (about 1 ms, and for each entry the caches hold
about 5 µs of system calls, read by two threads at once on two cores) and the fsynced audit seal (about 0.7 ms, more on a busy disk). What made it slower before, and is gone: moving init
into its v1 cgroups waited for an RCU grace period (8-16 ms here), where
init is now forked from a thread of cordon that passes through the cgroups;
registering the forwarded signals (a round trip to the Go runtime's signal
thread for each); the seccomp program's assembly and the syscall tables
behind it (now generated with the source); decoding resource limits through
a YAML round trip; the secret-scanning rules and the approvals pages built
by every cordon process as it started; the OpenTelemetry exporter's
protobuf runtime and gRPC, 68 package initialisers and 4 MB of binary in
every cordon process for the few that send traces (the exporter is now
cordon's own: ` + "`cordon version`" + ` went from about 745 to 585 minor faults); a walk
of every account's home, component by component, for credentials and
shared directories that mostly do not exist (one lstat answers for those). With two Go runtimes (the CLI
and init), seven namespaces, a cgroup and an fsync on
every run, a cold start stays above bubblewrap's on this machine; starting
faster than bubblewrap needs sandboxes built before they are asked for
(pre-warmed pools).

cordon serve is that: the "cordon serve" rows claim a sandbox built ahead
and run /bin/true in it over the loopback HTTP API, against a bare
fork/exec of /bin/true from the same Go client. A claim costs nothing but a
map lookup; what remains is the command's round trip through four
processes on two cores (client, server, the sandbox's init, the command)
where a bare fork/exec has two. Measured piece by piece on this machine: a
command in a kept-alive sandbox, without HTTP, takes about 1.45x a bare
fork/exec (init waits in poll(2) on its control socket and a pidfd per
command; the host reads the socket through Go's poller; each wake-up across
processes costs 0.1-0.2 ms on this virtual machine); the HTTP request and
the server add about 0.3 ms in the same process and about 1 ms between
processes; the audit records' fsync before the answer (audit_sync each,
the default) adds 0.2-0.5 ms more. A command's output buffers (32 KiB for
each stream, the answer's writer and its encoders) and the cgroup counters
the watcher reads every few milliseconds were allocated fresh each time;
with the collector handing freed memory back to the kernel, a request
faulted in about 150 pages, 4-5 ms on this machine, and now about 30 (the
buffers are reused). The goals: 2.5x a bare fork/exec over
HTTP, 1.5x through the Go API in the same process (the BoxExec row). Each
waiting sandbox of a cordon serve is one process, its init. The build of a replacement
sandbox starts 20 ms after a claim, so that it does not compete with the
claimed sandbox's first command for the two cores.

A cordon run that waits on its command keeps two processes: cordon itself
and the sandbox's init. Once the command has run for a second, cordon
hands its heap's free pages back and unmaps the pages of its own program
that starting it mapped (code and read-only data, found from its ELF
headers and checked against its mappings); init unmaps its own the same
way, without a collection, which would cost it more than it returns;
cordon unmaps them again after each drift check. This changes what is
mapped more than what is used: those pages stay in the page cache, shared
by every process of the program, where the kernel reclaims them before
mapped ones, and the next touch maps them again. The table's PSS per idle
sandbox (four at once) went from 9.8 to about 5 MiB. Its anonymous part,
about 3.8 MiB (cordon 2.8, init 1.1: the Go runtimes' own structures and
what the start left live in cordon's heap), is what each sandbox costs
for sure; it is as it was, but for the cgroup counters that the watcher
reads every 20 ms, now parsed in place, so that an idle run no longer
grows its heap. A cordon that is not root also gives each sandbox its
own copy of the lean program in memory (about 3.7 MB of shared memory,
which PSS counts only where it is mapped).

Many sandboxes started at once cost about what they cost one by one (the
"many at once" rows): CPU, not a lock, bounds them. They once queued for
tens of seconds, because each sandbox's watcher reopened its cgroup counter
files every 20 ms, and every open walks the cgroup file system under a lock
shared with every cgroup and network namespace operation on the host (the
counters are now read through descriptors opened once), and later for
seconds, because every v1 cgroup move took the global lock that waits for
the grace period.

The egress proxy hands a tunnel's bytes to the kernel (splice) whenever
both sides are TCP connections, with or without a byte budget: each splice
is counted, against the budget when there is one, before its bytes are
written.

Go micro-benchmarks for the hot paths: ` + "`go test -run '^$' -bench . ./internal/profile ./internal/seccomp/policy ./internal/egress ./internal/audit ./internal/toolpolicy ./internal/gateway`" + `
(profile loading, seccomp program assembly, egress rule matching, proxy
throughput and connection setup, audit append, tool policy decisions with
and without CEL constraints, and the MCP gateway's cost per call). The
gateway's own cost is a second MCP hop (the agent's connection to cordon,
cordon's to the tool's server) and the policy decision; with the audit log,
each call and its decision are fsynced before the call runs and its result
before the agent sees it: two disk flushes per call, which dominate. The
MCP library leaves a large buffer behind for every message it decodes; at
Go's default collector target (GOGC 100) collecting them cost twice the
relay itself, so cordon mcp and cordon serve run at 400 (unless GOGC or
GOMEMLIMIT is set): 390 µs added per call before, about 130 µs after, the
benchmark set as they are.

A tool server's call that names a file is resolved twice: before it is
decided, and again after the server acted, to find out whether a name on
its path led the server to another file (the path's directories compared,
and, for a write, the files of the server's writable directories changed
since). In the same process that second look adds about 160 µs per call
(BenchmarkPathChecks). Under cordon mcp each look is a command started in
one sandbox of the server's profile kept for the gateway's life, not a
sandbox of its own: with the reference filesystem server and the official
TypeScript SDK client, 40 calls per conversation on this machine, a read
took 74 ms per call with one new sandbox per resolution and no second
look, and 35 ms with both looks in the kept sandbox; a write 77 ms and
65 ms.

The audit log commits in groups: one fdatasync serves every record written
before it started, and a sync waits, for half a sync's time at most, for
the writers the last one released to write again, so that 8 writers that
each wait for their own record share one sync instead of taking turns in
two groups (about 7 events per sync, from about 4.5). Each writer still
waits for a sync that covers its own record: with 8 of them, a sync here
(0.15-0.25 ms, more on a busy disk) and the wake-ups and writes around it
bound the rate to what the Audit log row shows; 50k durable events per
second would need a disk that syncs in 0.15 ms with nothing else in the
cycle, or writers that do not wait for their own record.

A guarded workspace (the "Guarded workspace against direct" table) costs
little while the command runs: the command writes to an overlay whose
upper layer is on disk, and cordon checks what that layer's file system
lost every 20 ms and walks the layer at most every 500 ms (a twentieth of
a core at most) to hold it to the workspace's limits. What it adds comes
after the command, and grows with the files the run made: cordon reads and
hashes each new file once (the content a profile would be known by is
parsed only where its keys could be spelled), then lands what is not held:
a new directory of which everything lands (node_modules, a build's output)
by one rename, other files by a rename each; nothing is copied or synced.
Profiled on this machine (perf, and timestamps from the sandboxed script),
the capture's reading and hashing is most of what follows the command. A
git add that finds an object it already has freshens it (utime), which in
a guarded workspace copies the object up into the layer: when git on the
host last wrote the index (the sandbox sees other owners, as root on a
workspace root owns, so git hashes every file again), the first git add in
the sandbox copies up an object per file.

## Latest results

![start-up latency per tool](benchmarks-startup.svg)

`

// writeDocs rewrites docs/BENCHMARKS.md and the start-up plot.
func writeDocs(repo, report string, bars []bar) error {
	if err := os.WriteFile(filepath.Join(repo, "docs", "benchmarks-startup.svg"), []byte(svg(bars)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(repo, "docs", "BENCHMARKS.md"), []byte(docsIntro+report), 0o644)
}

// svg draws the medians as horizontal bars on a log scale, one group per
// payload.
func svg(bars []bar) string {
	const left, width, rowH, top = 150.0, 520.0, 20.0, 30.0
	maxMS := 1.0
	for _, b := range bars {
		maxMS = math.Max(maxMS, float64(b.d)/1e6)
	}
	scale := func(v float64) float64 {
		return width * math.Log10(1+v) / math.Log10(1+maxMS)
	}
	var rows strings.Builder
	y := top
	group := ""
	for _, b := range bars {
		if b.payload != group {
			group = b.payload
			y += 8
			fmt.Fprintf(&rows, `<text x="4" y="%.0f" font-weight="bold">%s</text>`+"\n", y+12, group)
			y += rowH
		}
		v := float64(b.d) / 1e6
		fill := "#8899aa"
		if strings.HasPrefix(b.tool, "cordon") {
			fill = "#2a7f62"
		}
		fmt.Fprintf(&rows, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", left-6, y+13, b.tool)
		fmt.Fprintf(&rows, `<rect x="%.0f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", left, y+2, scale(v), rowH-5, fill)
		fmt.Fprintf(&rows, `<text x="%.1f" y="%.0f">%.1f ms</text>`+"\n", left+scale(v)+4, y+13, v)
		y += rowH
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">
<text x="4" y="16">Median start-up time (log scale)</text>
%s</svg>
`, left+width+80, y+10, rows.String())
}
