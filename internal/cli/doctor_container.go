package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/cordon-sandbox/cordon/internal/container"
	"github.com/cordon-sandbox/cordon/internal/landlock"
	"github.com/cordon-sandbox/cordon/internal/sandbox"
)

// containerCheck is one thing cordon needs that a container runtime may
// withhold: whether it holds here and, when not, why and the fix.
type containerCheck struct {
	Need  container.Need `json:"need"`
	Holds bool           `json:"holds"`
	Why   string         `json:"why,omitempty"`
	Fix   *container.Fix `json:"fix,omitempty"`
}

// containerReport is doctor's view of the container cordon runs in.
type containerReport struct {
	container.Info
	Checks []containerCheck `json:"checks"`
}

// ok reports whether every check holds.
func (r *containerReport) ok() bool {
	if r == nil {
		return true
	}
	for _, c := range r.Checks {
		if !c.Holds {
			return false
		}
	}
	return true
}

// onlyLacksCgroup reports whether every check holds but, maybe, the
// writable cgroup's.
func (r *containerReport) onlyLacksCgroup() bool {
	if r == nil {
		return true
	}
	for _, c := range r.Checks {
		if !c.Holds && c.Need != container.NeedCgroup {
			return false
		}
	}
	return true
}

// checkContainer looks for a container (below root) and, in one, checks
// each need from what doctor found of the host, the trial sandbox's
// result and idmap, which tells whether the workspace dir can be idmapped.
// Outside a container it returns nil.
func checkContainer(root string, h sandbox.Host, trial string, dir string, idmap func(string) error) *containerReport {
	info := container.Detect(root)
	if !info.In() {
		return nil
	}
	r := &containerReport{Info: info}
	add := func(need container.Need, holds bool, why string) {
		c := containerCheck{Need: need, Holds: holds}
		if !holds {
			fix := container.Fixes(need, dir)
			c.Why, c.Fix = why, &fix
		}
		r.Checks = append(r.Checks, c)
	}
	trialSays := func(word string) bool { return trial != "ok" && strings.Contains(trial, word) }
	add(container.NeedUserns, h.UserNamespaces == "" && !trialSays("setting hostname"),
		firstOf(h.UserNamespaces, trial)+": the runtime's seccomp profile refuses namespaces to a container without CAP_SYS_ADMIN")
	if h.Root {
		add(container.NeedRootMounts, info.SysAdmin, "cordon runs as root without CAP_SYS_ADMIN: it cannot open the view's mounts")
	}
	add(container.NeedMount, info.AppArmor == "" || trial == "ok",
		fmt.Sprintf("AppArmor profile %q may deny mounts", info.AppArmor))
	add(container.NeedProc, len(info.MaskedProc) == 0,
		fmt.Sprintf("%s covered (the runtime's masked and read-only paths): the kernel refuses a new /proc", strings.Join(info.MaskedProc, ", ")))
	add(container.NeedLandlock, h.LandlockABI >= landlock.MinABI,
		fmt.Sprintf("Landlock ABI %d, cordon needs %d", h.LandlockABI, landlock.MinABI))
	add(container.NeedSeccomp, h.Seccomp == "" && h.SeccompNotify, firstOf(h.Seccomp, "no seccomp user notification"))
	why := h.Cgroup.Problem
	if info.CgroupReadOnly {
		why = "/sys/fs/cgroup is mounted read-only"
	}
	add(container.NeedCgroup, h.Cgroup.Delegated, why)
	if err := idmap(dir); err != nil {
		first, _, _ := strings.Cut(err.Error(), ", so cordon refuses")
		add(container.NeedIdmap, false, first+"; or give it an owner that is not root (chown -R 1000:1000 "+dir+"), or run cordon as one ("+
			container.UserFlags.Docker+"; "+container.UserFlags.Kubernetes+"); cordon run --allow-degraded=idmap runs as its owner, host root")
	} else {
		add(container.NeedIdmap, true, "")
	}
	return r
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// printContainer prints the container section of doctor's report.
func printContainer(w io.Writer, r *containerReport) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\ncontainer: %s (%s)\n", r.Runtime, strings.Join(r.Evidence, "; "))
	for _, c := range r.Checks {
		if c.Holds {
			fmt.Fprintf(w, "  %-26s yes\n", c.Need)
			continue
		}
		fmt.Fprintf(w, "  %-26s NO: %s\n", c.Need, c.Why)
		fmt.Fprint(w, c.Fix.Join("      "))
	}
}
