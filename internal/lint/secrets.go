package lint

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
)

// secretPaths are where credentials live: a bind of one of them, or of a
// directory holding one, hands them to the agent.
var secretPaths = []string{"/root", "/home", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/var/run/docker.sock", "/run/docker.sock",
	"/run/containerd", "/var/lib/docker", "/etc/kubernetes", "/etc/ssh"}

// secretNames are file and directory names that hold credentials wherever
// they are.
var secretNames = []string{".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".netrc", ".git-credentials", ".npmrc", ".pypirc",
	".config/gcloud", ".config/gh", ".vault-token", "id_rsa", "id_ed25519", "credentials.json"}

// secretEnv matches environment variable names that carry credentials.
var secretEnv = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?|^AWS_|^GH_|^GITHUB_|_PAT$)`)
})

func init() {
	register(Rule{
		Code: "CL302", Name: "secrets-readable", Severity: Error,
		Summary: "credentials are in reach: home directories, SSH and cloud keys, .env files, secret-looking environment variables",
		Why:     "secrets are what a manipulated agent hunts first; anything it can read, it can send",
		Fix:     "bind only what the agent needs, never homes, keys or .env files; give it scoped tokens through a tool instead of the environment",
		Check: func(c *Context, t *Target, r *Reporter) {
			p := t.Profile
			for i, m := range p.Mounts {
				if why := secretIn(m.Path); why != "" {
					r.At(t, fmt.Sprintf("mounts[%d].path", i), fmt.Sprintf("%s %s", m.Path, why), "")
				}
			}
			if ws := p.Workspace.Path; path.IsAbs(ws) {
				if why := secretIn(ws); why != "" {
					r.At(t, "workspace.path", fmt.Sprintf("the workspace %s %s", ws, why), "make the workspace the project directory, not a home")
				}
			}
			for i, name := range p.Env.Pass {
				if secretEnv().MatchString(name) {
					r.At(t, fmt.Sprintf("env.pass[%d]", i), fmt.Sprintf("the host variable %s, a credential by its name, is passed in", name), "")
				}
			}
		},
	})
}

// secretIn says how a bind of host path p reaches credentials, or "".
func secretIn(p string) string {
	p = path.Clean(p)
	if p == "/" {
		return "is the whole host file system, homes and keys included"
	}
	for _, s := range secretPaths {
		switch {
		case p == s:
			return "holds credentials"
		case strings.HasPrefix(s, p+"/"):
			return "contains " + s
		case strings.HasPrefix(p, s+"/") && (s == "/home" || s == "/root"):
			return "is in a home directory, where keys and tokens live"
		}
	}
	for _, n := range secretNames {
		if strings.HasSuffix(p, "/"+n) || strings.Contains(p, "/"+n+"/") {
			return "holds credentials (" + n + ")"
		}
	}
	if b := path.Base(p); b == ".env" || strings.HasPrefix(b, ".env.") {
		return "is an environment file, where secrets are kept"
	}
	return ""
}
