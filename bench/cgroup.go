package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/cgroup"
)

// cgroupScript runs its arguments in a cgroup of their own with the memory
// and process limits of cordon's default profile, made for the run and
// removed after it, as one would give any sandbox limits: the shell moves
// itself in, runs the command, moves back and removes the cgroup. $1 is the
// memory limit file's name, then the parent directories, then --, then the
// command.
const cgroupScript = `memfile=$1; shift
parents=
while [ "$1" != -- ]; do parents="$parents $1"; shift; done; shift
cg=bench-$$
for d in $parents; do
  mkdir "$d/$cg" || exit 125
  [ -e "$d/$cg/$memfile" ] && echo 2147483648 > "$d/$cg/$memfile"
  [ -e "$d/$cg/pids.max" ] && echo 512 > "$d/$cg/pids.max"
done
for d in $parents; do echo $$ > "$d/$cg/cgroup.procs" || exit 125; done
"$@"; rc=$?
for d in $parents; do echo $$ > "$d/cgroup.procs"; rmdir "$d/$cg"; done
exit $rc`

// inCgroup returns a wrapper that runs a command line in a cgroup with
// limits, or why there is none here.
func inCgroup() (func([]string) []string, string) {
	if os.Geteuid() != 0 {
		return nil, "making cgroups needs root here"
	}
	h, err := cgroup.System()
	if err != nil {
		return nil, err.Error()
	}
	dirs, err := h.Plan("bench")
	if err != nil {
		return nil, err.Error()
	}
	memfile := "memory.limit_in_bytes"
	if h.Version() == "v2" {
		memfile = "memory.max"
	}
	args := []string{"sh", "-c", cgroupScript, "sh", memfile}
	for _, d := range dirs {
		if strings.HasSuffix(d, "/cpuacct/bench") {
			continue // measured with cpu where they share a hierarchy
		}
		args = append(args, filepath.Dir(d))
	}
	if len(args) == 5 {
		return nil, fmt.Sprintf("no cgroup hierarchy at %s", h.Root)
	}
	args = append(args, "--")
	return func(c []string) []string { return append(append([]string{}, args...), c...) }, ""
}
