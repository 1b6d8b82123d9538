package toolchain

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// isRustupProxy reports whether the program at p is one of rustup's
// proxies (cargo, rustc, ... in ~/.cargo/bin): rustup itself under
// another name, as a link to it or the same file.
func isRustupProxy(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	if b := filepath.Base(real); b == "rustup" || b == "rustup-init" {
		return true
	}
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	ru, err := os.Stat(filepath.Join(filepath.Dir(p), "rustup"))
	return err == nil && os.SameFile(fi, ru)
}

// throughRustup finds the program a rustup proxy would run: name in the
// toolchain rustup selects, as rustup does: RUSTUP_TOOLCHAIN, else a
// directory override (rustup override set) for the working directory or a
// parent, else the nearest rust-toolchain.toml or rust-toolchain file,
// else the default toolchain. The toolchain's own directory is what is
// bound, never ~/.cargo (which holds registry credentials) nor rustup's
// root; inside, `cargo +TOOLCHAIN` is not available.
func (r *resolver) throughRustup(proxy, name string) (prog, via, missing string) {
	home := r.rustupHome(proxy)
	if home == "" {
		return "", "", "a rustup proxy, but rustup's home (RUSTUP_HOME, ~/.rustup) has no toolchains"
	}
	settings := map[string]string{}
	if text, err := readSmall(filepath.Join(home, "settings.toml"), maxShim, nil); err == nil {
		settings = tomlValues(text)
	}
	tc, from := r.selectedToolchain(home, settings)
	if from == "" {
		return "", "", "a rustup proxy, but rustup has no default toolchain (rustup default stable)"
	}
	if !validVersion(tc) {
		return "", "", "rustup: the toolchain named in " + from + " is not a valid toolchain name"
	}
	dir, err := toolchainDir(home, tc, settings["default_host_triple"])
	if err != nil {
		return "", "", fmt.Sprintf("rustup selects %s (%s): %v", tc, from, err)
	}
	p := filepath.Join(dir, "bin", name)
	if !executable(p) {
		return "", "", fmt.Sprintf("rustup selects %s (%s), which has no %s (a component not installed?)", filepath.Base(dir), from, name)
	}
	return p, fmt.Sprintf("rustup toolchain %s, from %s", filepath.Base(dir), from), ""
}

// rustupHome is rustup's root: RUSTUP_HOME, else .rustup beside the
// proxy's .cargo, else in HOME; "" when none has a toolchains directory.
func (r *resolver) rustupHome(proxy string) string {
	var cands []string
	if v, ok := r.getenv("RUSTUP_HOME"); ok && filepath.IsAbs(v) {
		cands = append(cands, filepath.Clean(v))
	}
	cands = append(cands, filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(proxy))), ".rustup"))
	if v, ok := r.getenv("HOME"); ok && filepath.IsAbs(v) {
		cands = append(cands, filepath.Join(v, ".rustup"))
	}
	for _, c := range cands {
		if fi, err := os.Stat(filepath.Join(c, "toolchains")); err == nil && fi.IsDir() {
			return c
		}
	}
	return ""
}

// selectedToolchain is the toolchain rustup selects, and where that is
// said; from is "" when nothing selects one. The name is as written there,
// not yet checked.
func (r *resolver) selectedToolchain(home string, settings map[string]string) (tc, from string) {
	if v, ok := r.getenv("RUSTUP_TOOLCHAIN"); ok && v != "" {
		return v, "RUSTUP_TOOLCHAIN"
	}
	if r.cwd != "" && filepath.IsAbs(r.cwd) {
		for d := filepath.Clean(r.cwd); ; d = filepath.Dir(d) {
			if tc, ok := settings["overrides."+d]; ok {
				return tc, "rustup override for " + d
			}
			if d == "/" {
				break
			}
		}
		owners := trustedOwners(r.cwd)
		for _, d := range searchDirs(r.cwd, owners) {
			for _, f := range []string{"rust-toolchain.toml", "rust-toolchain"} {
				if tc, ok := toolchainFile(filepath.Join(d, f), owners); ok {
					return tc, filepath.Join(d, f)
				}
			}
		}
	}
	if tc := settings["default_toolchain"]; tc != "" {
		return tc, "the default in " + filepath.Join(home, "settings.toml")
	}
	return "", ""
}

// toolchainFile reads the channel a rust-toolchain(.toml) file names: the
// [toolchain] table's channel, or the legacy file's one line; ok is false
// when there is no such file (a link, a FIFO and a file not of owners
// count as none, see readSmall) or it names no channel.
func toolchainFile(f string, owners []uint32) (tc string, ok bool) {
	text, err := readSmall(f, maxVersionFile, owners)
	if err != nil {
		return "", false
	}
	if strings.Contains(text, "[toolchain]") {
		tc = tomlValues(text)["toolchain.channel"]
	} else {
		line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		tc = strings.TrimSpace(line)
	}
	return tc, tc != ""
}

// toolchainDir is the installed toolchain tc names: its directory under
// home/toolchains, the name as given or completed with the host triple
// (stable is stable-x86_64-unknown-linux-gnu).
func toolchainDir(home, tc, triple string) (string, error) {
	if tc == "" || strings.ContainsAny(tc, "/\\") || tc == "." || tc == ".." {
		return "", fmt.Errorf("not a toolchain name cordon can follow")
	}
	if triple == "" {
		triple = hostTriple()
	}
	base := filepath.Join(home, "toolchains")
	for _, name := range []string{tc, tc + "-" + triple} {
		if fi, err := os.Stat(filepath.Join(base, name)); err == nil && fi.IsDir() {
			return filepath.Join(base, name), nil
		}
	}
	return "", fmt.Errorf("not installed in %s", base)
}

// hostTriple is the target triple of this machine's rustup toolchains.
func hostTriple() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "riscv64": "riscv64gc", "ppc64le": "powerpc64le", "s390x": "s390x"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return arch + "-unknown-linux-gnu"
}

// tomlValues reads the simple TOML rustup writes: key = "value" lines,
// under [table] headers; keys come out as "table.key" (the key unquoted).
// Anything else is left out.
func tomlValues(text string) map[string]string {
	out := map[string]string{}
	table := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			table = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if uk, err := strconv.Unquote(k); err == nil {
			k = uk
		}
		uv, err := strconv.Unquote(v)
		if err != nil {
			continue
		}
		if table != "" {
			k = table + "." + k
		}
		out[k] = uv
	}
	return out
}
