package client

import (
	"github.com/cordon-sandbox/cordon/internal/api"
	"github.com/cordon-sandbox/cordon/internal/approvals"
	"github.com/cordon-sandbox/cordon/internal/outcome"
)

// The API's wire types, named here so that code outside this module can
// name them too.
type (
	// SandboxInfo describes a sandbox: its id, agent, state, timeouts and
	// session counters.
	SandboxInfo = api.Sandbox
	// CreateRequest is a sandbox to create: its agent, the environment
	// of its commands, its timeout and a first command.
	CreateRequest = api.CreateRequest
	// ExecRequest is one command to run: its argv, environment,
	// directory, stdin and timeout.
	ExecRequest = api.ExecRequest
	// Command is a background command: its id, argv, state and, once
	// it ended, its outcome.
	Command = api.Command
	// ExecResult is a command's whole output and outcome.
	ExecResult = api.ExecResult
	// ExecEvent is one line of a streamed command.
	ExecEvent = api.ExecEvent
	// DirListing is a directory's entries; DirEntry one of them.
	DirListing = api.DirListing
	DirEntry   = api.DirEntry
	// TarResult counts what a tar upload or download moved.
	TarResult = api.TarResult
	// Health is the server's state.
	Health = api.Health
	// Decision is the reason and scope of an approval's decision.
	Decision = api.Decision
	// ApprovalItem is an approval request and its state.
	ApprovalItem = approvals.Item

	// Outcome is how a command ended, exactly as cordon run reports it
	// (docs/OUTCOME.md); Status one of the statuses below; Limit the
	// limit that ended a command.
	Outcome = outcome.Outcome
	Status  = outcome.Status
	Limit   = outcome.Limit
)

// The statuses of an Outcome.
const (
	StatusOK                   = outcome.OK
	StatusExitNonzero          = outcome.ExitNonzero
	StatusSignaled             = outcome.Signaled
	StatusTimeout              = outcome.Timeout
	StatusOutputLimit          = outcome.OutputLimit
	StatusMemoryLimit          = outcome.MemoryLimit
	StatusPidsLimit            = outcome.PidsLimit
	StatusCPUTimeLimit         = outcome.CPUTimeLimit
	StatusFileSizeLimit        = outcome.FileSizeLimit
	StatusEgressBudget         = outcome.EgressBudget
	StatusEgressDenied         = outcome.EgressDenied
	StatusWorkspaceSizeLimit   = outcome.WorkspaceSizeLimit
	StatusWorkspaceInodesLimit = outcome.WorkspaceInodesLimit
	StatusCacheSizeLimit       = outcome.CacheSizeLimit
	StatusDrift                = outcome.Drift
	StatusSandboxError         = outcome.SandboxError
)

// limitStatuses are the statuses of a command that a limit ended.
var limitStatuses = map[Status]bool{
	StatusTimeout: true, StatusOutputLimit: true, StatusMemoryLimit: true, StatusPidsLimit: true,
	StatusCPUTimeLimit: true, StatusFileSizeLimit: true, StatusEgressBudget: true, StatusEgressDenied: true,
	StatusWorkspaceSizeLimit: true, StatusWorkspaceInodesLimit: true, StatusCacheSizeLimit: true,
}
