// Package compat is cordon's compatibility suite: what coding agents run
// every day (git, file operations across directories, Python with a virtual
// environment, pip, SQLite and multiprocessing, Node with npm and a
// development server, Go with its module proxy, C with make, archives, long
// pipelines, programs that need a terminal), each a real program doing real
// work inside `cordon run` on the embedded default profile, with only the
// --allow flags the workload needs.
//
// The workloads are shell scripts in testdata/workloads, one a workload,
// each beginning with a "proves:" comment that says what it shows. The test
// (go test ./internal/compat, as root for every column) runs each of them:
//
//   - under cordon as root, on a workspace root owns;
//   - under cordon rootless, as uid 65534 with --allow-degraded=cgroup, on a
//     workspace that user owns;
//   - under bubblewrap, as the same unprivileged user, with the view of
//     cordon's default profile (the same read-only system paths, the
//     workspace read-write, tmpfs /tmp and home, the same environment, no
//     network, or the host's for the workloads that reach a registry).
//
// A workload must pass under cordon. One that fails under bubblewrap too is
// the workload's problem or the host's; one that fails under cordon alone is
// cordon's, and the test says so. Failures that are cordon's and known are
// listed in the test with the error they show, so that the suite stays
// green while it names them, and fails once one of them is fixed (remove it
// from the list then). The test prints a table of pass, fail and wall time
// per workload and column (go test -v), and writes it as Markdown to
// $CORDON_COMPAT_REPORT when that is set (bench/run -only compat does, see
// docs/COMPATIBILITY.md).
//
// The workloads that need the network (npm's registry, the Go module proxy)
// are skipped, saying why, when the host itself cannot reach it.
package compat
