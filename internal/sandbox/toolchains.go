package sandbox

import (
	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
	"github.com/cordon-sandbox/cordon/internal/toolchain"
)

// addToolchains adds the profile's toolchains to the spec: each install
// prefix bound read-only at the same place, with the credentials found in
// it masked, the PATH with their directories first. It returns what it did, as notes for the outcome.
func addToolchains(spec *Spec, opts Options) ([]string, error) {
	pl := opts.Toolchains
	if pl == nil {
		if len(opts.Profile.Toolchains) == 0 {
			return nil, nil
		}
		var argv []string
		if !opts.SelfExec {
			argv = opts.Args
		}
		var err error
		if pl, err = toolchain.ResolveRun(opts.Profile, argv, toolchain.Host{Getenv: opts.LookupEnv, Cwd: opts.Cwd}); err != nil {
			return nil, setupErr("toolchains", err)
		}
	}
	for _, b := range pl.Binds() {
		spec.Mounts = append(spec.Mounts, Mount{Source: b, Target: b, Mask: pl.Masks(b)})
	}
	if pl.Path != "" {
		spec.Env = wire.SetEnv(spec.Env, "PATH", pl.Path)
		spec.Path = pl.Path
	}
	return pl.Notes(), nil
}
