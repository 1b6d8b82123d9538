package profile

import (
	"fmt"
	"slices"
	"strings"
)

// Auto, in toolchains, stands for the command the sandbox is started with:
// its toolchain, as the user's PATH resolves it, is the one bound.
const Auto = "auto"

// Toolchains names the commands whose installation on the host, as the
// PATH of the environment cordon was started in resolves them (through
// version-manager shims and symbolic links), the sandbox runs: each one's
// install prefix is bound read-only at the same place and its bin
// directory put first on the sandbox's PATH (see internal/toolchain).
// Written as a list of command names, which may include Auto, or as the
// single word auto.
type Toolchains []string

// UnmarshalYAML reads a list of names, or the scalar auto.
func (t *Toolchains) UnmarshalYAML(unmarshal func(any) error) error {
	names, err := wordOrList(unmarshal)
	*t = names
	return err
}

// wordOrList reads a list of names, or a single word (any word is kept:
// validation reports one that is not auto, where it is written).
func wordOrList(unmarshal func(any) error) ([]string, error) {
	var names []string
	listErr := unmarshal(&names)
	if listErr == nil {
		return names, nil
	}
	var word string
	if err := unmarshal(&word); err != nil {
		return nil, listErr
	}
	return []string{word}, nil
}

// HasAuto reports whether the command the sandbox is started with is
// among the toolchains.
func (t Toolchains) HasAuto() bool { return slices.Contains(t, Auto) }

// commandName accepts the names of commands found on a PATH: letters,
// digits and ._+- (python3.12, g++, x86_64-linux-gnu-gcc), starting with a
// letter, a digit or '_'.
var commandName = nameRule{first: alnum + "_", rest: alnum + "._+-", max: 128}

func (p *Profile) validateToolchains(src *source, bad func(field, format string, args ...any)) {
	seen := map[string]bool{}
	for i, name := range p.Toolchains {
		field := fmt.Sprintf("toolchains[%d]", i)
		if len(p.Toolchains) == 1 && !src.has(field) && src.has("toolchains") {
			// Written as a single word: only auto is one.
			if name != Auto {
				bad("toolchains", "%q: want a list of command names, such as [%s], or auto", name, name)
			}
			return
		}
		switch {
		case name == "":
			bad(field, "empty: want a command name, such as python3, or auto")
		case strings.ContainsRune(name, '/'):
			bad(field, "%q is a path: toolchains names commands, found on your PATH; bind a directory with mounts instead", name)
		case name != Auto && !commandName.MatchString(name):
			bad(field, "%q is not a command name (letters, digits and ._+-, such as python3 or g++), nor auto", name)
		case seen[name]:
			bad(field, "%s is listed twice", name)
		}
		seen[name] = true
	}
}

// AddToolchain adds a toolchain given on the command line (--toolchain).
func (p *Profile) AddToolchain(name string) error {
	switch {
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("%q is a path: name a command found on your PATH, such as python3", name)
	case name != Auto && !commandName.MatchString(name):
		return fmt.Errorf("%q is not a command name (letters, digits and ._+-, such as python3 or g++), nor auto", name)
	case slices.Contains(p.Toolchains, name):
		return nil
	}
	p.Toolchains = append(p.Toolchains, name)
	return nil
}
