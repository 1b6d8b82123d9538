package toolchain

import (
	"path/filepath"
	"slices"
	"strings"
)

// shells are the programs whose -c script ScriptCommands reads.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true}

// ShellToolchains are the toolchains a shell gets with toolchains: auto,
// beside those its -c script names: what a shell reads from its input, a
// file or a terminal cannot be read in advance (agent harnesses pipe their
// scripts to bash -s), and a script runs what its callees run (make runs
// go). cordon doctor shows how each resolves here.
var ShellToolchains = []string{"python3", "node", "go", "cargo"}

// ShellCommands are, for a shell, the programs its -c script starts
// (ScriptCommands) and the ShellToolchains; nil for any other command.
func ShellCommands(argv []string) []string {
	if len(argv) == 0 || !shells[filepath.Base(argv[0])] {
		return nil
	}
	out := ScriptCommands(argv)
	for _, t := range ShellToolchains {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// skipped are the words a command of a script may begin with that are not
// the program it runs: keywords, and builtins that run the next word.
var skipped = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "while": true, "until": true,
	"do": true, "done": true, "fi": true, "esac": true, "!": true, "exec": true, "command": true, "builtin": true, "time": true, "env": true, "nohup": true}

// maxScriptCommands bounds what one script adds.
const maxScriptCommands = 32

// ScriptCommands returns, for `sh -c SCRIPT` (bash, dash, zsh, ksh; options
// such as -lc or -e before it), the names of the programs SCRIPT starts:
// the first word of each command, after variable assignments and the
// words in skipped, where it is a plain command name. Agents run most of
// their work that way (`bash -c 'cd app && go test ./...'`). Words the
// shell would expand (variables, quotes, globs) are not guessed at. Nil for
// any other command.
func ScriptCommands(argv []string) []string {
	if len(argv) < 3 || !shells[filepath.Base(argv[0])] {
		return nil
	}
	script := ""
	for i := 1; i < len(argv) && script == ""; i++ {
		a := argv[i]
		if len(a) < 2 || a[0] != '-' || a[1] == '-' {
			return nil // the script's file, or a long option
		}
		if strings.ContainsRune(a[1:], 'c') {
			if i+1 == len(argv) {
				return nil
			}
			script = argv[i+1]
		}
	}
	seps := func(r rune) bool { return strings.ContainsRune(";&|\n(){}`", r) }
	var out []string
	for _, cmd := range strings.FieldsFunc(script, seps) {
		for _, w := range strings.Fields(cmd) {
			if skipped[w] || isAssignment(w) {
				continue
			}
			if plainName(w) && len(out) < maxScriptCommands {
				out = append(out, w)
			}
			break
		}
	}
	return out
}

// isAssignment reports whether w sets a variable for the command (X=1).
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

// plainName reports whether w names a command the shell looks up on its
// PATH as written: no path, quote, expansion or glob.
func plainName(w string) bool {
	if w == "" || w[0] == '-' || w[0] == '.' {
		return false
	}
	return strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == ""
}
