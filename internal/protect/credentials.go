package protect

import (
	"path"
	"slices"
	"strings"
)

// Credential is a file or directory that holds credentials wherever it is
// found: in a home directory, and in whatever a sandbox's view shows (a
// workspace, a toolchain's install prefix).
type Credential struct {
	// Path is a name, or names joined by "/" that must end the path found
	// (".docker/config.json" is config.json in a directory .docker).
	Path string
	// Store marks a store of secrets, which no project holds as its own
	// files: a directory holding one, at any depth, is no workspace (see
	// Sensitive). The others are tools' configuration, which a project may
	// hold (its .npmrc naming a registry) and a toolchain's prefix has
	// masked (see package toolchain).
	Store bool
	// FileOnly matches a file or a link only: a directory of that name is
	// something else (Python's docker/credentials package).
	FileOnly bool
	// Why says what it holds.
	Why string
}

// catalog is every credential cordon knows of, the one list that
// Sensitive and the masking of toolchains' prefixes read.
var catalog = []Credential{
	// Stores of secrets, found in home directories.
	{Path: ".ssh", Store: true, Why: "SSH private keys (id_*) and the hosts they open"},
	{Path: ".gnupg", Store: true, Why: "GnuPG private keys"},
	{Path: ".aws", Store: true, Why: "AWS access keys and roles (credentials, config)"},
	{Path: ".azure", Store: true, Why: "Azure CLI tokens"},
	{Path: ".config/gcloud", Store: true, Why: "Google Cloud tokens (credentials.db, access_tokens.db, application_default_credentials.json)"},
	{Path: ".kube", Store: true, Why: "Kubernetes clusters' credentials (config)"},
	{Path: ".docker/config.json", Store: true, Why: "container registries' passwords"},
	{Path: ".netrc", Store: true, Why: "passwords for hosts (curl, git, pip, ftp)"},
	{Path: "_netrc", Store: true, Why: "passwords for hosts, as some tools name .netrc"},
	{Path: ".git-credentials", Store: true, Why: "git's stored passwords"},
	{Path: ".password-store", Store: true, Why: "pass's encrypted passwords"},
	{Path: ".pgpass", Store: true, Why: "PostgreSQL passwords"},
	{Path: ".vault-token", Store: true, Why: "a HashiCorp Vault token"},
	// Tools' configuration that may carry a registry's or a service's
	// token.
	{Path: ".npmrc", FileOnly: true, Why: "npm's configuration, which may carry a registry's _authToken"},
	{Path: "npmrc", FileOnly: true, Why: "npm's global (PREFIX/etc/npmrc) or built-in configuration, which may carry an _authToken"},
	{Path: ".yarnrc", FileOnly: true, Why: "yarn's configuration, which may carry a registry's token"},
	{Path: ".yarnrc.yml", FileOnly: true, Why: "yarn's configuration, which may carry npmAuthToken"},
	{Path: "pip.conf", FileOnly: true, Why: "pip's configuration, whose index-url may carry a password"},
	{Path: "pip.ini", FileOnly: true, Why: "pip's configuration on Windows-style layouts, as pip.conf"},
	{Path: ".pypirc", FileOnly: true, Why: "PyPI upload tokens"},
	{Path: "credentials", FileOnly: true, Why: "cargo's registry token (CARGO_HOME/credentials), AWS keys"},
	{Path: "credentials.toml", FileOnly: true, Why: "cargo's registry token"},
	{Path: ".gem/credentials", FileOnly: true, Why: "RubyGems API key"},
	{Path: ".config/gh/hosts.yml", FileOnly: true, Why: "GitHub CLI's token"},
	{Path: ".config/hub", FileOnly: true, Why: "hub's GitHub token"},
	{Path: ".terraform.d/credentials.tfrc.json", FileOnly: true, Why: "Terraform Cloud's token"},
	{Path: ".m2/settings.xml", FileOnly: true, Why: "Maven's server passwords"},
	{Path: ".gradle/gradle.properties", FileOnly: true, Why: "Gradle's repository passwords and signing keys"},
	{Path: ".composer/auth.json", FileOnly: true, Why: "Composer's registry tokens"},
	{Path: ".env", FileOnly: true, Why: "an application's secrets (dotenv)"},
}

// Catalog is every credential cordon knows of.
func Catalog() []Credential { return slices.Clone(catalog) }

// Credentials are the stores of secrets (Credential.Store): paths,
// relative to a directory, that make it a home directory or a store of
// secrets rather than a project.
func Credentials() []string {
	var out []string
	for _, c := range catalog {
		if c.Store {
			out = append(out, c.Path)
		}
	}
	return out
}

// byName indexes the catalog by the last name of each path.
var byName = func() map[string][]Credential {
	m := map[string][]Credential{}
	for _, c := range catalog {
		name := path.Base(c.Path)
		m[name] = append(m[name], c)
	}
	return m
}()

// named reports whether name is the last name of any credential's path.
func named(name string) bool {
	_, ok := byName[name]
	return ok
}

// Match returns the credential that the path rel (relative to whatever
// directory is searched, "/"-separated) is, if any; dir says rel is a
// directory (not a link to one). storesOnly looks only for stores.
func Match(rel string, dir, storesOnly bool) (Credential, bool) {
	for _, c := range byName[path.Base(rel)] {
		if (storesOnly && !c.Store) || (dir && c.FileOnly) {
			continue
		}
		if rel == c.Path || strings.HasSuffix(rel, "/"+c.Path) {
			return c, true
		}
	}
	return Credential{}, false
}
