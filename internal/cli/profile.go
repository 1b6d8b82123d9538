package cli

import (
	"fmt"

	"github.com/goccy/go-yaml"
)

// profileCmd implements `cordon profile show`.
func profileCmd(e *env, args []string) error {
	if len(args) == 0 || args[0] != "show" {
		return fmt.Errorf("usage: cordon profile show [--profile FILE] [--workspace DIR] [--ro PATH] [--rw PATH]")
	}
	fs := newFlags(e, "profile show", "profile show [flags]")
	var pf profileFlags
	pf.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("profile show: unexpected argument %q", fs.Arg(0))
	}
	p, err := pf.load(e)
	if err != nil {
		return err
	}
	out, err := yaml.MarshalWithOptions(p, yaml.IndentSequence(true))
	if err != nil {
		return fmt.Errorf("printing profile: %w", err)
	}
	_, err = e.stdout.Write(out)
	return err
}
