// Package version says which cordon this is: the version a release build
// was given, else the module version `go install ...@vX` recorded, else the
// commit a checkout was built from, else "dev". It reads only the build
// information the Go toolchain embeds (runtime/debug.ReadBuildInfo).
package version

import (
	"runtime/debug"
	"strings"
)

// Version, when not empty, is cordon's version, set by a release build with
// -ldflags "-X github.com/cordon-sandbox/cordon/internal/version.Version=v1.2.3".
// It wins over everything the build information says.
var Version string

// Dev is the version of a build that carries no version at all (go run,
// go test, go build -buildvcs=false in a checkout).
const Dev = "dev"

// Info is what a binary knows about its own build.
type Info struct {
	Version  string `json:"version"`
	Module   string `json:"module,omitempty"`
	Go       string `json:"go,omitempty"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi, Version)
}

// String returns the running binary's version.
func String() string { return Get().Version }

// FromBuildInfo derives an Info from bi (nil when the binary carries none)
// and override (the -X version; empty when none). The version is, in order:
// override; the main module's version when it is one (installed with
// `go install MODULE/cmd/cordon@vX`, or stamped from the checkout's VCS by
// the go command); "devel-" and the commit's first 12 hex digits, its time
// (UTC, yyyymmddhhmmss) and "+dirty" for uncommitted changes, when only the
// VCS settings are known; else Dev.
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	var in Info
	if bi != nil {
		in.Module = bi.Main.Path
		in.Go = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	switch {
	case override != "":
		in.Version = override
	case bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		in.Version = bi.Main.Version
	case in.Revision != "":
		in.Version = develVersion(in.Revision, in.Time, in.Modified)
	default:
		in.Version = Dev
	}
	return in
}

// develVersion names a build from a checkout by its commit:
// devel-0123456789ab-20240102150405+dirty.
func develVersion(rev, t string, modified bool) string {
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if stamp := compactTime(t); stamp != "" {
		v += "-" + stamp
	}
	if modified {
		v += "+dirty"
	}
	return v
}

// compactTime turns an RFC 3339 UTC time as the go command records it
// (2024-01-02T15:04:05Z) into 20240102150405; anything else gives "".
func compactTime(t string) string {
	if len(t) != len("2006-01-02T15:04:05Z") || !strings.HasSuffix(t, "Z") {
		return ""
	}
	var b strings.Builder
	for _, c := range t[:len(t)-1] {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == '-' || c == ':' || c == 'T':
		default:
			return ""
		}
	}
	if b.Len() != 14 {
		return ""
	}
	return b.String()
}
