package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		s := []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2024-01-02T15:04:05Z"},
		}
		if modified != "" {
			s = append(s, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return s
	}
	main := func(v string) debug.Module {
		return debug.Module{Path: "github.com/cordon-sandbox/cordon", Version: v}
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
	}{
		{"no build information", nil, "", Info{Version: Dev}},
		{"no build information, release", nil, "v1.2.3", Info{Version: "v1.2.3"}},
		{
			"go install at a tag",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v1.4.0")},
			"",
			Info{Version: "v1.4.0", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8"},
		},
		{
			"go install at a pseudo-version",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v0.0.0-20240102150405-0123456789ab")},
			"",
			Info{Version: "v0.0.0-20240102150405-0123456789ab", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8"},
		},
		{
			"release override wins over the module version",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v1.4.0")},
			"v1.5.0-rc.1",
			Info{Version: "v1.5.0-rc.1", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8"},
		},
		{
			"checkout, clean",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("(devel)"), Settings: vcs("false")},
			"",
			Info{Version: "devel-0123456789ab-20240102150405", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8", Revision: rev, Time: "2024-01-02T15:04:05Z"},
		},
		{
			"checkout, uncommitted changes",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("(devel)"), Settings: vcs("true")},
			"",
			Info{Version: "devel-0123456789ab-20240102150405+dirty", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8", Revision: rev, Time: "2024-01-02T15:04:05Z", Modified: true},
		},
		{
			"checkout stamped by the go command: its version is kept",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("v0.0.0-20240102150405-0123456789ab+dirty"), Settings: vcs("true")},
			"",
			Info{Version: "v0.0.0-20240102150405-0123456789ab+dirty", Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8", Revision: rev, Time: "2024-01-02T15:04:05Z", Modified: true},
		},
		{
			"checkout, short revision and a time in another form",
			&debug.BuildInfo{Main: main(""), Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2024-01-02 15:04"}}},
			"",
			Info{Version: "devel-abc123", Module: "github.com/cordon-sandbox/cordon", Revision: "abc123", Time: "2024-01-02 15:04"},
		},
		{
			"checkout built without VCS stamping",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: main("(devel)"), Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}},
			"",
			Info{Version: Dev, Module: "github.com/cordon-sandbox/cordon", Go: "go1.26.8"},
		},
		{
			"test binary",
			&debug.BuildInfo{GoVersion: "go1.26.8", Path: "github.com/cordon-sandbox/cordon/internal/version.test"},
			"",
			Info{Version: Dev, Go: "go1.26.8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromBuildInfo(tt.bi, tt.override); got != tt.want {
				t.Errorf("FromBuildInfo() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGetHonoursOverride(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9"
	if got := String(); got != "v9.9.9" {
		t.Errorf("String() = %q with Version set, want v9.9.9", got)
	}
	if got := Get().Go; got == "" {
		t.Errorf("Get().Go is empty: a test binary carries build information")
	}
}
