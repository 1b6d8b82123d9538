package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// completionCmd implements `cordon completion bash|zsh|fish`: a script,
// generated from the command tree, completing cordon's commands,
// subcommands and flags, and file names where a flag takes a file or a
// directory.
func completionCmd(e *env, shell string, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(e.stderr, "cordon: completion %s: unexpected %q\n", shell, args[0])
		return ExitUsage
	}
	switch shell {
	case "bash":
		writeBash(e.stdout)
	case "zsh":
		writeZsh(e.stdout)
	case "fish":
		writeFish(e.stdout)
	}
	return 0
}

// A flag's value, as completion offers it.
const (
	valueNone = "none" // a value, but nothing to offer (an address, a name)
	valueFile = "file"
	valueDir  = "dir"
)

// compFlag is a flag as completion sees it.
type compFlag struct {
	name  string // as typed: --profile, -v
	value string // "" for a boolean flag, else valueNone, valueFile or valueDir
	usage string
}

// compNode is a command as completion sees it: its path ("" for cordon
// itself, "audit verify"), its subcommands and its flags.
type compNode struct {
	path  string
	subs  []*command
	flags []compFlag
	// files: its operands are files (it takes operands and has no
	// subcommand to offer instead).
	files bool
}

// completionNodes walks the command tree.
func completionNodes() []compNode {
	root := compNode{subs: commands}
	out := []compNode{root}
	var walk func(prefix string, cs []*command)
	walk = func(prefix string, cs []*command) {
		for _, c := range cs {
			path := strings.TrimSpace(prefix + " " + c.name)
			n := compNode{path: path, subs: c.subs, flags: flagsOf(c), files: len(c.subs) == 0 || c.run != nil}
			out = append(out, n)
			walk(path, c.subs)
		}
	}
	walk("", commands)
	return out
}

// flagsOf lists c's flags, with what each one's value is.
func flagsOf(c *command) []compFlag {
	var out []compFlag
	c.flagSet().VisitAll(func(f *flag.Flag) {
		cf := compFlag{name: flagName(f.Name), usage: f.Usage}
		if !isBoolFlag(f) {
			cf.value = valueKind(f)
		}
		out = append(out, cf)
	})
	return out
}

// flagName is how a flag is written: --name, or -v for a one-letter one.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// valueKind reads what a flag's value is from the name its usage gives it
// (`FILE`, `DIR`, ...).
func valueKind(f *flag.Flag) string {
	name, _ := flag.UnquoteUsage(f)
	switch name {
	case "FILE", "PATH", "PUB", "OLD", "STORE":
		return valueFile
	case "DIR":
		return valueDir
	}
	return valueNone
}

// argFlags lists the flags of n that take a value, as NAME=KIND words.
func (n compNode) argFlags() []string {
	var out []string
	for _, f := range n.flags {
		if f.value != "" {
			out = append(out, f.name+"="+f.value)
		}
	}
	return out
}

func (n compNode) flagNames() []string {
	var out []string
	for _, f := range n.flags {
		out = append(out, f.name)
	}
	return out
}

func (n compNode) subNames() []string {
	var out []string
	for _, s := range n.subs {
		out = append(out, s.name)
	}
	return out
}

// shellCase writes a case arm per node: "path") echo WORDS;; in sh syntax.
func shellCase(w io.Writer, nodes []compNode, words func(compNode) []string) {
	for _, n := range nodes {
		if ws := words(n); len(ws) > 0 {
			fmt.Fprintf(w, "\t\t%q) echo %q ;;\n", n.path, strings.Join(ws, " "))
		}
	}
}

func filesWord(n compNode) []string {
	if n.files {
		return []string{"yes"}
	}
	return nil
}

// writeShellData writes the functions bash and zsh share: the
// subcommands, the flags, the flags taking a value (NAME=KIND) and whether
// operands are files, of each command path.
func writeShellData(w io.Writer) {
	nodes := completionNodes()
	for _, fn := range []struct {
		name  string
		words func(compNode) []string
	}{
		{"subs", compNode.subNames},
		{"flags", compNode.flagNames},
		{"argflags", compNode.argFlags},
		{"files", filesWord},
	} {
		fmt.Fprintf(w, "__cordon_%s() {\n\tcase \"$1\" in\n", fn.name)
		shellCase(w, nodes, fn.words)
		fmt.Fprint(w, "\tesac\n}\n\n")
	}
}

// The walk both bash and zsh do over the words before the cursor: the
// command path, skipping flags and their values; "--" ends it.
const shellWalk = `# __cordon_walk WORD... sets cmdpath to the command the words name and
# dashdash to 1 when they hold "--".
__cordon_walk() {
	cmdpath="" dashdash=0
	local skip=0 w f
	for w in "$@"; do
		if [ "$skip" = 1 ]; then skip=0; continue; fi
		case "$w" in
		--) dashdash=1; return ;;
		=) ;;
		-*=*) ;;
		-*)
			for f in $(__cordon_argflags "$cmdpath"); do
				[ "${f%%=*}" = "$w" ] && skip=1
			done ;;
		*)
			for f in $(__cordon_subs "$cmdpath"); do
				if [ "$f" = "$w" ]; then cmdpath="${cmdpath:+$cmdpath }$w"; break; fi
			done ;;
		esac
	done
}

# __cordon_kind PATH FLAG prints what FLAG of PATH takes: file, dir, none,
# or nothing for a flag without a value.
__cordon_kind() {
	local f
	for f in $(__cordon_argflags "$1"); do
		[ "${f%%=*}" = "$2" ] && { echo "${f#*=}"; return 0; }
	done
	return 0
}
`

func writeBash(w io.Writer) {
	fmt.Fprint(w, "# bash completion for cordon, generated by cordon completion bash.\n")
	fmt.Fprint(w, "# Load it with: source <(cordon completion bash)\n\n")
	writeShellData(w)
	fmt.Fprint(w, shellWalk)
	fmt.Fprint(w, `
_cordon() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev="" cmdpath dashdash kind
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
	__cordon_walk "${COMP_WORDS[@]:1:COMP_CWORD-1}"
	COMPREPLY=()
	# After --, the words are a command of its own: the shell's defaults.
	[ "$dashdash" = 1 ] && return
	# --flag=VALUE, split by the shell at "=".
	if [ "$prev" = "=" ] && [ "$COMP_CWORD" -gt 1 ]; then
		prev=${COMP_WORDS[COMP_CWORD-2]}
	elif [ "$cur" = "=" ]; then
		prev=${COMP_WORDS[COMP_CWORD-1]} cur=""
	fi
	kind=$(__cordon_kind "$cmdpath" "$prev")
	case "$kind" in
	file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
	dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return ;;
	none) return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(__cordon_flags "$cmdpath")" -- "$cur"))
		return
	fi
	local subs
	subs=$(__cordon_subs "$cmdpath")
	if [ -n "$subs" ]; then
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
	fi
	if [ ${#COMPREPLY[@]} -eq 0 ] && [ -n "$(__cordon_files "$cmdpath")" ]; then
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}

complete -o default -F _cordon cordon
`)
}

func writeZsh(w io.Writer) {
	fmt.Fprint(w, "#compdef cordon\n")
	fmt.Fprint(w, "# zsh completion for cordon, generated by cordon completion zsh.\n")
	fmt.Fprint(w, "# Load it with: source <(cordon completion zsh), after compinit;\n")
	fmt.Fprint(w, "# or save it as _cordon in a directory of $fpath.\n\n")
	writeShellData(w)
	fmt.Fprint(w, shellWalk)
	fmt.Fprint(w, `
_cordon() {
	local cur=${words[CURRENT]} prev=${words[CURRENT-1]} cmdpath dashdash kind subs
	__cordon_walk "${(@)words[2,CURRENT-1]}"
	if [ "$dashdash" = 1 ]; then _files; return; fi
	if [[ $cur == --*=* ]]; then
		prev=${cur%%=*}
		compset -P '*='
	fi
	kind=$(__cordon_kind "$cmdpath" "$prev")
	case "$kind" in
	file) _files; return ;;
	dir) _files -/; return ;;
	none) return ;;
	esac
	if [[ $cur == -* ]]; then
		compadd -- ${=$(__cordon_flags "$cmdpath")}
		return
	fi
	subs=$(__cordon_subs "$cmdpath")
	if [ -n "$subs" ]; then
		compadd -- ${=subs}
	elif [ -n "$(__cordon_files "$cmdpath")" ]; then
		_files
	fi
}

if [ "$funcstack[1]" = "_cordon" ]; then
	_cordon "$@"
else
	compdef _cordon cordon
fi
`)
}

func writeFish(w io.Writer) {
	nodes := completionNodes()
	fmt.Fprint(w, "# fish completion for cordon, generated by cordon completion fish.\n")
	fmt.Fprint(w, "# Load it with: cordon completion fish | source\n")
	fmt.Fprint(w, "# or save it as ~/.config/fish/completions/cordon.fish.\n\n")
	fishSwitch := func(name string, words func(compNode) []string) {
		fmt.Fprintf(w, "function __cordon_%s\n\tswitch \"$argv[1]\"\n", name)
		for _, n := range nodes {
			if ws := words(n); len(ws) > 0 {
				fmt.Fprintf(w, "\t\tcase %s\n\t\t\tprintf '%%s\\n' %s\n", fishQuote(n.path), strings.Join(ws, " "))
			}
		}
		fmt.Fprint(w, "\tend\nend\n\n")
	}
	fishSwitch("subs", compNode.subNames)
	fishSwitch("argflags", compNode.argFlags)
	fmt.Fprint(w, `# __cordon_path prints the command the words before the cursor name.
function __cordon_path
	set -l p ''
	set -l skip 0
	for w in (commandline -opc)[2..-1]
		if test $skip = 1
			set skip 0
			continue
		end
		switch $w
			case --
				break
			case '-*=*'
			case '-*'
				for f in (__cordon_argflags $p)
					if test (string replace -r '=.*' '' -- $f) = $w
						set skip 1
					end
				end
			case '*'
				if contains -- $w (__cordon_subs $p)
					set p (string trim -- "$p $w")
				end
		end
	end
	echo $p
end

`)
	for _, n := range nodes {
		cond := "test (__cordon_path) = " + fishQuote(n.path)
		if !n.files {
			fmt.Fprintf(w, "complete -c cordon -f -n %s\n", fishQuote(cond))
		}
		for _, s := range n.subs {
			fmt.Fprintf(w, "complete -c cordon -f -n %s -a %s -d %s\n", fishQuote(cond), s.name, fishQuote(s.short))
		}
		for _, f := range n.flags {
			opt := "-l " + strings.TrimLeft(f.name, "-")
			if len(f.name) == 2 {
				opt = "-s " + f.name[1:]
			}
			switch f.value {
			case valueFile:
				opt += " -r -F"
			case valueDir:
				opt += " -x -a '(__fish_complete_directories)'"
			case valueNone:
				opt += " -x"
			}
			fmt.Fprintf(w, "complete -c cordon -n %s %s -d %s\n", fishQuote(cond), opt, fishQuote(firstSentence(f.usage)))
		}
	}
}

// fishQuote quotes s for fish (and any POSIX shell's single quotes but for
// the escaped quote).
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// firstSentence shortens a flag's usage for a completion menu.
func firstSentence(usage string) string {
	usage = strings.ReplaceAll(usage, "`", "")
	if i := strings.IndexAny(usage, ":;("); i > 20 {
		usage = strings.TrimSpace(usage[:i])
	}
	return usage
}
