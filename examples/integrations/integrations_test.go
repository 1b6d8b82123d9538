// Package integrations holds the recipes of docs/INTEGRATIONS.md: the
// configuration that puts cordon under Claude Code, Codex CLI, Cursor,
// Claude Desktop, the OpenAI Agents SDK and LangChain. Its tests prove
// them as written: each MCP configuration's command is started through the
// official MCP TypeScript SDK, which lists the tools and calls one; the
// Claude Code hook is fed the input Claude Code documents; the Python
// recipes pass the same server parameters; the doc quotes the files.
package integrations_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/testbin"
)

// recipeFiles are the files of the recipes, each quoted whole by the doc.
var recipeFiles = []string{
	"claude-code/.mcp.json",
	"claude-code/settings.json",
	"claude-code/cordon-bash.py",
	"codex/config.toml",
	"cursor/mcp.json",
	"claude-desktop/claude_desktop_config.json",
	"openai-agents/agent.py",
	"langchain/agent.py",
}

// TestDocQuotesFiles checks that every code block of docs/INTEGRATIONS.md
// that names a file of the recipes (a line "**`examples/integrations/F`**"
// just before it) is that file, byte for byte, and that every recipe file
// is quoted: what a reader copies is what these tests run.
func TestDocQuotesFiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "INTEGRATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]bool{}
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(lines[i], "**`examples/integrations/")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "`")
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || !strings.HasPrefix(lines[j], "```") {
			t.Errorf("docs/INTEGRATIONS.md:%d: %s is named but no code block follows", i+1, name)
			continue
		}
		k := j + 1
		for k < len(lines) && lines[k] != "```" {
			k++
		}
		if k == len(lines) {
			t.Fatalf("docs/INTEGRATIONS.md:%d: the code block of %s does not end", j+1, name)
		}
		block := strings.Join(lines[j+1:k], "\n") + "\n"
		file, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("docs/INTEGRATIONS.md:%d: %v", i+1, err)
			continue
		}
		if block != string(file) {
			t.Errorf("docs/INTEGRATIONS.md:%d: the code block differs from examples/integrations/%s:\n--- doc\n%s--- file\n%s", j+1, name, block, file)
		}
		quoted[name] = true
		i = k
	}
	for _, f := range recipeFiles {
		if !quoted[f] {
			t.Errorf("docs/INTEGRATIONS.md does not quote examples/integrations/%s", f)
		}
	}
}

// server is an MCP server's command and arguments, as a configuration
// gives them.
type server struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// jsonServer is the server "cordon" of an mcpServers configuration
// (Claude Code, Cursor, Claude Desktop).
func jsonServer(t *testing.T, file string) server {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]server `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	s, ok := cfg.MCPServers["cordon"]
	if !ok || s.Command == "" {
		t.Fatalf("%s: no mcpServers.cordon with a command", file)
	}
	return s
}

// tomlServer is [mcp_servers.cordon] of Codex's config.toml, read by
// Python's tomllib.
func tomlServer(t *testing.T, file string) server {
	t.Helper()
	out, err := exec.Command("python3", "-c", `import json, sys, tomllib
with open(sys.argv[1], "rb") as f:
    s = tomllib.load(f)["mcp_servers"]["cordon"]
print(json.dumps(s))`, file).Output()
	if err != nil {
		t.Skipf("python3 with tomllib (3.11) is needed to read %s: %v", file, err)
	}
	var s server
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// pythonServer is the server parameters a Python recipe passes: the
// dictionary literal that holds "command" and "args".
func pythonServer(t *testing.T, file string) server {
	t.Helper()
	out, err := exec.Command("python3", "-c", `import ast, json, sys
found = []
for node in ast.walk(ast.parse(open(sys.argv[1]).read(), sys.argv[1])):
    if isinstance(node, ast.Dict) and {"command", "args"} <= {k.value for k in node.keys if isinstance(k, ast.Constant)}:
        d = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
        found.append({"command": ast.literal_eval(d["command"]), "args": ast.literal_eval(d["args"])})
print(json.dumps(found))`, file).Output()
	if err != nil {
		t.Skipf("python3 is needed to read %s: %v", file, err)
	}
	var found []server
	if err := json.Unmarshal(out, &found); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one dictionary with command and args, found %d", file, len(found))
	}
	return found[0]
}

// TestPythonRecipes: the OpenAI Agents SDK and LangChain cannot be
// installed here (no PyPI), so what is tested is that their recipes start
// the same server as the tested Claude Code and Codex configurations, and
// that they compile.
func TestPythonRecipes(t *testing.T) {
	want := jsonServer(t, "claude-code/.mcp.json")
	for _, f := range []string{"openai-agents/agent.py", "langchain/agent.py"} {
		got := pythonServer(t, f)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s starts %q %q, want %q %q as claude-code/.mcp.json", f, got.Command, got.Args, want.Command, want.Args)
		}
		cmd := exec.Command("python3", "-c", "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')", f)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not compile: %v\n%s", f, err, out)
		}
	}
	if got := tomlServer(t, "codex/config.toml"); !reflect.DeepEqual(got, want) {
		t.Errorf("codex/config.toml starts %q %q, want %q %q as claude-code/.mcp.json", got.Command, got.Args, want.Command, want.Args)
	}
}

// cordonDir is a directory holding the cordon binary ($CORDON_BIN's, else
// one built from this module), for PATH.
func cordonDir(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CORDON_BIN"); bin != "" {
		if filepath.Base(bin) != "cordon" {
			t.Fatalf("CORDON_BIN=%s: the configurations run \"cordon\": name the binary so", bin)
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(abs)
	}
	dir := t.TempDir()
	if err := testbin.Cordon(filepath.Join(dir, "cordon")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// canSandbox skips the test when this host cannot run cordon sandboxes.
func canSandbox(t *testing.T, bin string) {
	t.Helper()
	if exec.Command(filepath.Join(bin, "cordon"), "doctor").Run() != nil {
		t.Skip("this host cannot run cordon sandboxes (cordon doctor)")
	}
}

// installClient installs the MCP TypeScript SDK (testdata/mcpclient) in a
// directory of its own and returns its list.mjs.
func installClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the MCP configurations are not started")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: no MCP TypeScript SDK to start the configurations with")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "list.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mcpclient", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Skipf("npm ci could not install the MCP TypeScript SDK (no registry?): %v\n%s", err, out)
	}
	return filepath.Join(dir, "list.mjs")
}

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mcpProfile is the profile the recipes copy to .cordon/mcp.yaml.
var mcpProfile = filepath.Join("..", "profiles", "mcp-coding-agent.yaml")

// TestMCPConfigs starts the command of each MCP configuration exactly as
// written, in the place its client starts it, through the official MCP
// TypeScript SDK: the gateway lists the profile's tools, and list_files
// lists the project.
func TestMCPConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sandboxes")
	}
	bin := cordonDir(t)
	canSandbox(t, bin)
	client := installClient(t)

	// A user's home and a project of theirs, with the profile where the
	// doc says to put it.
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	project := filepath.Join(root, "project")
	copyFile(t, mcpProfile, filepath.Join(project, ".cordon", "mcp.yaml"))
	copyFile(t, "claude-code/.mcp.json", filepath.Join(project, "README.md"))
	// Claude Desktop's: a directory of its own, the profile beside the
	// user's configuration.
	copyFile(t, mcpProfile, filepath.Join(home, ".config", "cordon", "mcp.yaml"))
	copyFile(t, "claude-code/.mcp.json", filepath.Join(home, "cordon-desktop", "README.md"))

	for _, c := range []struct {
		name string
		file string
		// cwd is where the client starts the server.
		cwd string
		// listed is the directory list_files must show.
		listed string
		// vars are the client's own substitutions in the configuration.
		vars map[string]string
	}{
		// Claude Code and Codex start project servers in the project.
		{name: "claude-code", file: "claude-code/.mcp.json", cwd: project, listed: project},
		{name: "codex", file: "codex/config.toml", cwd: project, listed: project},
		// Cursor fills in ${workspaceFolder}; where it starts the server
		// does not matter then.
		{name: "cursor", file: "cursor/mcp.json", cwd: home, listed: project, vars: map[string]string{"${workspaceFolder}": project}},
		// Claude Desktop has no project: the command goes to its own.
		{name: "claude-desktop", file: "claude-desktop/claude_desktop_config.json", cwd: "/", listed: filepath.Join(home, "cordon-desktop")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s server
			if strings.HasSuffix(c.file, ".toml") {
				s = tomlServer(t, c.file)
			} else {
				s = jsonServer(t, c.file)
			}
			for i := range s.Args {
				for k, v := range c.vars {
					s.Args[i] = strings.ReplaceAll(s.Args[i], k, v)
				}
			}
			if strings.Contains(strings.Join(s.Args, " "), "${") {
				t.Fatalf("%s: a variable the test does not fill in: %q", c.file, s.Args)
			}
			args := append([]string{client, c.cwd, "list_files", `{"path": "."}`, s.Command}, s.Args...)
			cmd := exec.Command("node", args...)
			cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %q: %v\n%s", s.Command, s.Args, err, out)
			}
			lines := map[string]string{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				k, v, _ := strings.Cut(sc.Text(), ": ")
				lines[k] = v
			}
			if got := lines["tools"]; got != "list_files read_file run write_file" {
				t.Errorf("tools: %q, want the profile's four\n%s", got, out)
			}
			var listing struct {
				Path    string `json:"path"`
				Entries []struct {
					Name string `json:"name"`
				} `json:"entries"`
			}
			if err := json.Unmarshal([]byte(lines["list_files ok"]), &listing); err != nil {
				t.Fatalf("list_files did not answer a listing: %v\n%s", err, out)
			}
			var names []string
			for _, e := range listing.Entries {
				names = append(names, e.Name)
			}
			if listing.Path != c.listed || !slices.Contains(names, "README.md") {
				t.Errorf("list_files listed %s %q, want %s with README.md\n%s", listing.Path, names, c.listed, out)
			}
		})
	}
}

// hookInput is the input Claude Code gives a PreToolUse hook
// (code.claude.com/docs/en/hooks, "PreToolUse input").
func hookInput(cwd, tool string, toolInput map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"session_id":      "abc123",
		"transcript_path": "/home/user/.claude/projects/p/abc123.jsonl",
		"cwd":             cwd,
		"permission_mode": "default",
		"hook_event_name": "PreToolUse",
		"tool_name":       tool,
		"tool_input":      toolInput,
	})
	return b
}

// hookOutput is the PreToolUse hook output Claude Code reads.
type hookOutput struct {
	HookSpecificOutput struct {
		HookEventName            string         `json:"hookEventName"`
		PermissionDecision       string         `json:"permissionDecision"`
		PermissionDecisionReason string         `json:"permissionDecisionReason"`
		UpdatedInput             map[string]any `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// hook installs the hook in a project as the doc says and returns a
// function that runs it as settings.json's command, with env added.
func hook(t *testing.T) (project string, run func(input []byte, env ...string) (stdout, stderr string, code int)) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the hook is not run")
	}
	b, err := os.ReadFile("claude-code/settings.json")
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &settings); err != nil {
		t.Fatalf("claude-code/settings.json: %v", err)
	}
	pre := settings.Hooks["PreToolUse"]
	if len(pre) != 1 || pre[0].Matcher != "Bash" || len(pre[0].Hooks) != 1 || pre[0].Hooks[0].Type != "command" {
		t.Fatalf("claude-code/settings.json: want one PreToolUse command hook on Bash, found %+v", pre)
	}
	command := pre[0].Hooks[0].Command
	project = t.TempDir()
	if err := os.Chmod(project, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "claude-code/cordon-bash.py", filepath.Join(project, ".claude", "hooks", "cordon-bash.py"))
	return project, func(input []byte, env ...string) (string, string, int) {
		// Claude Code runs a hook's command with the shell, in the
		// project, CLAUDE_PROJECT_DIR naming it.
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = project
		cmd.Env = append(append(os.Environ(), "CLAUDE_PROJECT_DIR="+project), env...)
		cmd.Stdin = bytes.NewReader(input)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
}

// TestClaudeCodeHookAnswers feeds the hook the inputs Claude Code sends and
// checks its answers.
func TestClaudeCodeHookAnswers(t *testing.T) {
	project, run := hook(t)

	// The Bash tool: wrapped, every other field of its input kept.
	in := map[string]any{"command": "npm test", "description": "Run the tests", "timeout": float64(120000), "run_in_background": false}
	stdout, stderr, code := run(hookInput(project, "Bash", in))
	if code != 0 {
		t.Fatalf("exit status %d: %s", code, stderr)
	}
	var o hookOutput
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("the answer %q is not the hook output: %v", stdout, err)
	}
	h := o.HookSpecificOutput
	if h.HookEventName != "PreToolUse" || h.PermissionDecision != "allow" || h.PermissionDecisionReason == "" {
		t.Errorf("answer %+v, want PreToolUse, allow and a reason", h)
	}
	want := map[string]any{"command": "cordon run -- bash -c 'npm test'", "description": "Run the tests", "timeout": float64(120000), "run_in_background": false}
	if !reflect.DeepEqual(h.UpdatedInput, want) {
		t.Errorf("updatedInput %v, want %v", h.UpdatedInput, want)
	}

	// Asked to, it lets the user confirm the rewritten command.
	stdout, _, _ = run(hookInput(project, "Bash", map[string]any{"command": "ls"}), "CORDON_HOOK_DECISION=ask")
	if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.HookSpecificOutput.PermissionDecision != "ask" {
		t.Errorf("CORDON_HOOK_DECISION=ask: answer %q (%v), want permissionDecision ask", stdout, err)
	}

	// Other tools are left alone: no answer, status 0.
	for _, tool := range []struct {
		name  string
		input map[string]any
	}{
		{"Read", map[string]any{"file_path": filepath.Join(project, "README.md")}},
		{"Write", map[string]any{"file_path": filepath.Join(project, "a.txt"), "content": "x"}},
		{"mcp__cordon__run", map[string]any{"argv": []string{"ls"}}},
	} {
		stdout, stderr, code := run(hookInput(project, tool.name, tool.input))
		if stdout != "" || code != 0 {
			t.Errorf("%s: answer %q, status %d (%s); want none, 0", tool.name, stdout, code, stderr)
		}
	}

	// What cannot be wrapped is blocked (status 2), never let through.
	for _, bad := range []string{"not json", `{"tool_name": "Bash", "tool_input": {}}`} {
		stdout, stderr, code := run([]byte(bad))
		if code != 2 || stdout != "" || !strings.Contains(stderr, "cordon hook:") {
			t.Errorf("input %q: status %d, stdout %q, stderr %q; want 2 and a reason on stderr", bad, code, stdout, stderr)
		}
	}
}

// TestClaudeCodeHookRuns runs rewritten commands as the Bash tool would
// (bash -c) and compares their output with the original's run directly:
// quotes, newlines, heredocs and $ reach the sandbox's bash unchanged.
func TestClaudeCodeHookRuns(t *testing.T) {
	project, run := hook(t)
	bin := cordonDir(t)
	canSandbox(t, bin)
	direct := t.TempDir()
	for _, command := range []string{
		`echo plain`,
		`printf '%s\n' "it's" 'a "quoted" word' "back\\slash" 'a $dollar and a ` + "`backtick`" + `'`,
		"echo first\necho second; echo 'multi\nline quoted'",
		"cat <<'EOF'\nsingle ' double \" dollar $HOME backtick ` end\nEOF",
		`x=3; echo "$((x * 2)) ${x}" ; echo 'ünïcödé ✓'`,
		`echo written > note.txt && cat note.txt && ls`,
		`printf 'no newline at the end'`,
	} {
		stdout, stderr, code := run(hookInput(project, "Bash", map[string]any{"command": command, "description": "test"}))
		if code != 0 {
			t.Fatalf("%q: hook status %d: %s", command, code, stderr)
		}
		var o hookOutput
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		wrapped, _ := o.HookSpecificOutput.UpdatedInput["command"].(string)
		if !strings.HasPrefix(wrapped, "cordon run -- bash -c ") {
			t.Fatalf("%q: rewritten to %q", command, wrapped)
		}
		want := bashOutput(t, direct, command, nil)
		sandboxDir := t.TempDir()
		if err := os.Chmod(sandboxDir, 0o777); err != nil {
			t.Fatal(err)
		}
		got := bashOutput(t, sandboxDir, wrapped, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")})
		if got != want {
			t.Errorf("%q, rewritten to %q:\nin the sandbox: %q\ndirectly:       %q", command, wrapped, got, want)
		}
		os.Remove(filepath.Join(direct, "note.txt"))
	}
}

// bashOutput runs command with bash -c in dir and returns its stdout; a
// failure fails the test.
func bashOutput(t *testing.T, dir, command string, env []string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HOME=/home/agent"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash -c %q in %s: %v\n%s", command, dir, err, errb.String())
	}
	return out.String()
}

// TestClaudeCodeHookInRepository runs a rewritten command where the Bash
// tool's shell has gone into a subdirectory of a git repository: git
// finds its repository, and the command runs in that subdirectory.
func TestClaudeCodeHookInRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	project, run := hook(t)
	bin := cordonDir(t)
	canSandbox(t, bin)
	repo := t.TempDir()
	sub := filepath.Join(repo, "src", "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(repo, 0o777); err != nil {
		t.Fatal(err)
	}
	bashOutput(t, repo, "git init -q", nil)
	stdout, stderr, code := run(hookInput(project, "Bash", map[string]any{"command": "pwd; git rev-parse --show-prefix"}))
	if code != 0 {
		t.Fatalf("hook status %d: %s", code, stderr)
	}
	var o hookOutput
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatal(err)
	}
	wrapped, _ := o.HookSpecificOutput.UpdatedInput["command"].(string)
	got := bashOutput(t, sub, wrapped, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")})
	if want := sub + "\nsrc/pkg/\n"; got != want {
		t.Errorf("%q in %s printed %q, want %q", wrapped, sub, got, want)
	}
}
