package cli

import (
	"fmt"

	"github.com/goccy/go-yaml"
)

// profileCmd implements `cordon profile show`.
func profileCmd(e *env, args []string) error {
	if len(args) == 0 || args[0] != "show" {
		return fmt.Errorf("usage: cordon profile show [--profile FILE] [--workspace DIR] [--ro PATH] [--rw PATH] [--toolchain NAME] [-- CMD]")
	}
	fs := newFlags(e, "profile show", "profile show [flags] [-- CMD]")
	var pf profileFlags
	pf.register(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	p, err := pf.load(e)
	if err != nil {
		return err
	}
	out, err := yaml.MarshalWithOptions(p, yaml.IndentSequence(true))
	if err != nil {
		return fmt.Errorf("printing profile: %w", err)
	}
	if _, err = e.stdout.Write(out); err != nil {
		return err
	}
	// What follows -- is the command auto stands for.
	return writeToolchains(e, e.stdout, p, fs.Args())
}
