package obey

// Catalog is every kind of file cordon knows a host tool to run or obey
// from a tree a sandbox could write. Its order is the order Match tries.
// What it does not cover is in NotCovered.
var Catalog = []Entry{
	{
		Tool:  "git",
		Obeys: "a repository's hooks and configuration (core.fsmonitor, core.hooksPath, core.sshCommand, pager, editor, filter, diff and merge drivers, credential helpers, include paths, ! aliases), attributes selecting drivers, commondir and gitdir naming another repository, linked worktrees' and submodules' repositories; any directory holding HEAD, objects and refs is taken as a repository (see GitDir)",
		Where: Both,
		Source: "https://git-scm.com/docs/gitrepository-layout, https://git-scm.com/docs/githooks, " +
			"https://git-scm.com/docs/git-config, https://git-scm.com/docs/gitattributes",
		Names:       []string{".git"},
		Placeholder: true,
		Watch:       GitWatch,
	},
	{
		Tool:        "git",
		Obeys:       "submodules' URLs and update commands (submodule.NAME.update = !command)",
		Where:       Project,
		Source:      "https://git-scm.com/docs/gitmodules",
		Names:       []string{".gitmodules"},
		Placeholder: true,
	},
	{
		Tool:   "git",
		Obeys:  "HEAD, with objects and refs, makes a directory a git directory, a tree's root included, which git takes when no .git there is one it can use (none, or one whose HEAD was spoiled); direct mode moves aside one a run made at a workspace's root (see package protect)",
		Where:  Project,
		Source: "https://git-scm.com/docs/gitrepository-layout",
		Names:  []string{"HEAD"},
	},
	{
		Tool:        "Mercurial (hg)",
		Obeys:       "a repository's .hg/hgrc: [hooks] run on status, commit and every other command; [extensions] load Python",
		Where:       Both,
		Source:      "https://www.mercurial-scm.org/doc/hgrc.5.html",
		Names:       []string{".hg"},
		Placeholder: true,
		Watch:       []string{"hgrc"},
	},
	{
		Tool:        "Jujutsu (jj)",
		Obeys:       "a repository's .jj/repo/config.toml (aliases, ui.pager, ui.editor, diff and merge tools) and the git repository it keeps inside",
		Where:       Both,
		Source:      "https://jj-vcs.github.io/jj/latest/config/",
		Names:       []string{".jj"},
		Placeholder: true,
		Watch:       []string{"repo/config.toml", "config.toml", "repo/store/git/config", "repo/store/git/hooks"},
	},
	{
		Tool:        "direnv",
		Obeys:       ".envrc, a shell script run when a shell enters the directory",
		Where:       Project,
		Source:      "https://direnv.net/man/direnv-stdlib.1.html",
		Names:       []string{".envrc"},
		Placeholder: true,
	},
	{
		Tool:   "mise, asdf",
		Obeys:  "mise's tasks, hooks and env directives (mise.toml, .mise.toml, .mise/, mise/config.toml), asdf's and mise's tool versions (.tool-versions) that pick which installed plugin scripts run",
		Where:  Both,
		Source: "https://mise.jdx.dev/configuration.html, https://asdf-vm.com/manage/configuration.html",
		Names:  []string{"mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".mise", "mise", ".tool-versions", ".config/mise"},
	},
	{
		Tool:        "npm, yarn, pnpm",
		Obeys:       "project configuration: .npmrc (script-shell, node-options, registries), .yarnrc.yml (yarnPath: a script yarn runs instead of itself, plugins), .yarnrc (yarn-path), .pnpmfile.cjs (hooks run on install), .yarn/plugins and releases",
		Where:       Both,
		Source:      "https://docs.npmjs.com/cli/configuring-npm/npmrc, https://yarnpkg.com/configuration/yarnrc, https://classic.yarnpkg.com/lang/en/docs/yarnrc/, https://pnpm.io/pnpmfile",
		Names:       []string{".npmrc", ".yarnrc.yml", ".yarnrc", ".pnpmfile.cjs"},
		Placeholder: true,
	},
	{
		Tool:   "yarn",
		Obeys:  "plugins and releases a .yarnrc.yml names (.yarn/plugins, .yarn/releases)",
		Where:  Project,
		Source: "https://yarnpkg.com/configuration/yarnrc",
		Names:  []string{".yarn/plugins", ".yarn/releases"},
	},
	{
		Tool:   "Python (site), pip",
		Obeys:  "*.pth lines starting with import, sitecustomize.py and usercustomize.py, run whenever the environment's interpreter starts; pyvenv.cfg choosing the interpreter; pip.conf inside a virtual environment; activation scripts sourced by shells and direnv",
		Where:  Project,
		Source: "https://docs.python.org/3/library/site.html, https://pip.pypa.io/en/stable/topics/configuration/",
		Globs:  []string{"**/*.pth", "**/sitecustomize.py", "**/usercustomize.py", "**/pyvenv.cfg", "**/pip.conf", "**/bin/activate*", "**/Scripts/activate*", "**/bin/Activate.ps1", "**/Scripts/Activate.ps1"},
	},
	{
		Tool:        "cargo",
		Obeys:       ".cargo/config.toml: rustc-wrapper, runners, aliases, linkers",
		Where:       Both,
		Source:      "https://doc.rust-lang.org/cargo/reference/config.html",
		Names:       []string{".cargo"},
		Placeholder: true,
	},
	{
		Tool:   "rustup",
		Obeys:  "rust-toolchain.toml and rust-toolchain: the toolchain, by name or by path (path = \"./tc\": rustup's cargo and rustc then run ./tc/bin/cargo)",
		Where:  Project,
		Source: "https://rust-lang.github.io/rustup/overrides.html#the-toolchain-file",
		Names:  []string{"rust-toolchain.toml", "rust-toolchain"},
	},
	{
		Tool:        "editors",
		Obeys:       "workspace settings and tasks run when the folder is opened: VS Code (.vscode, *.code-workspace), JetBrains IDEs (.idea), Zed (.zed), development containers (.devcontainer, .devcontainer.json: postCreateCommand)",
		Where:       Project,
		Source:      "https://code.visualstudio.com/docs/editor/workspace-trust, https://www.jetbrains.com/help/idea/project-security.html, https://zed.dev/docs/tasks, https://containers.dev/implementors/json_reference/",
		Names:       []string{".vscode", ".idea", ".zed", ".devcontainer"},
		Placeholder: true,
	},
	{
		Tool:   "editors",
		Obeys:  "VS Code workspace files and dev container files at the top, vim's and Neovim's exrc (.exrc, .vimrc, .nvimrc, .nvim.lua, read with 'exrc' set)",
		Where:  Project,
		Source: "https://code.visualstudio.com/docs/editor/workspaces, https://neovim.io/doc/user/options.html#'exrc'",
		Names:  []string{".devcontainer.json", ".exrc", ".vimrc", ".nvimrc", ".nvim.lua"},
		Globs:  []string{"**/*.code-workspace"},
	},
	{
		Tool:        "coding agents",
		Obeys:       "project settings with hooks, permissions and MCP servers to start: Claude Code (.claude, .mcp.json), Cursor (.cursor), Gemini CLI (.gemini), opencode (.opencode, opencode.json)",
		Where:       Project,
		Source:      "https://docs.anthropic.com/en/docs/claude-code/settings, https://docs.cursor.com/context/model-context-protocol, https://github.com/google-gemini/gemini-cli/blob/main/docs/cli/configuration.md, https://opencode.ai/docs/config/",
		Names:       []string{".claude", ".mcp.json", ".cursor", ".gemini", ".opencode"},
		Placeholder: true,
	},
	{
		Tool:   "coding agents",
		Obeys:  "opencode's project configuration, whose local MCP servers it starts",
		Where:  Project,
		Source: "https://opencode.ai/docs/config/",
		Names:  []string{"opencode.json", "opencode.jsonc"},
	},
	{
		Tool:   "hook managers",
		Obeys:  "commands run by git hooks once installed: husky, pre-commit, lefthook",
		Where:  Project,
		Source: "https://typicode.github.io/husky/, https://pre-commit.com/, https://lefthook.dev/configuration/",
		Names:  []string{".husky", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook-local.yml", ".lefthook-local.yml"},
	},
	{
		Tool:   "CI",
		Obeys:  "workflows run with the repository's secrets once pushed",
		Where:  Project,
		Source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions",
		Names:  []string{".github/workflows"},
	},
	{
		Tool:   "shells, git, ripgrep",
		Obeys:  "start-up files and user configuration, read from a home directory (a workspace that is one is refused)",
		Where:  Home,
		Source: "https://www.gnu.org/software/bash/manual/html_node/Bash-Startup-Files.html, https://zsh.sourceforge.io/Intro/intro_3.html",
		Names: []string{".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
			".zshrc", ".zprofile", ".zshenv", ".zlogin", ".gitconfig", ".ripgreprc"},
	},
	*cordonFiles,
}

// cordonFiles is cordon's own: its directory in a project (.cordon, where
// the integrations keep their profiles), approval records by name, and
// profiles and approval records by content (Content).
var cordonFiles = &Entry{
	Tool:        "cordon",
	Obeys:       "profiles (what a sandbox may reach), approval records, and the .cordon directory of a project; profiles and records are known by content too, whatever their name",
	Where:       Both,
	Source:      "docs/PROFILES.md, docs/INTEGRATIONS.md",
	Names:       []string{".cordon"},
	Globs:       []string{"**/*.approval.yaml"},
	Placeholder: true,
}

// NotCovered is what the catalog leaves to a review of content: what a
// person runs by name is the project's own code, changed as the agent was
// asked to change it.
var NotCovered = []string{
	"build files a person runs by name: Makefile, package.json scripts, setup.py and build backends, Gradle and Maven builds, tox.ini, noxfile.py, Justfile",
	"the project's own code and tests, run when a person runs them",
	"configuration read only from a home directory or /etc, which no workspace may be (a home directory is refused as a workspace)",
	"tools configured to read a file of the project by an absolute path in configuration outside the project (a global core.hooksPath into the project is covered, see package protect)",
	"editor extensions that read further files of their own choosing",
	"instructions an agent reads from the project (CLAUDE.md, AGENTS.md, .cursorrules, .github/copilot-instructions.md): text a person reviews as content; hold them by glob in review.require_approval",
	"a git repository's own state during an operation (.git/rebase-merge, .git/sequencer), which git acts on only when a person continues the operation; direct mode reports it when the run made it",
}
