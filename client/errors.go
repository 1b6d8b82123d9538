package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The errors of the client are the SDKs' one vocabulary (docs/SDK.md):
// the same names, fields and HTTP statuses as in Python and TypeScript.
// Every one is a *CordonError for errors.As; each status the server
// answers with has its own type.

// CordonError is an answer of the server that is not a success, or
// (HTTPStatus 0) a command whose outcome is not ok.
type CordonError struct {
	// HTTPStatus is the status of the server's answer.
	HTTPStatus int
	Message    string
	// SandboxID is the sandbox the error names, when it names one.
	SandboxID string
}

func (e *CordonError) Error() string {
	if e.HTTPStatus == 0 {
		return e.Message
	}
	return fmt.Sprintf("cordon serve: %d: %s", e.HTTPStatus, e.Message)
}

// AuthError is 401: no valid token.
type AuthError struct{ *CordonError }

// ForbiddenError is 403: not this token's to do, or a path the sandbox
// may not write.
type ForbiddenError struct{ *CordonError }

// NotFoundError is 404: no such sandbox (or not the token's), no such
// file.
type NotFoundError struct{ *CordonError }

// ConflictError is 409: refused in the sandbox's state, or by its policy.
type ConflictError struct{ *CordonError }

// SandboxEndedError is 410: the sandbox has ended.
type SandboxEndedError struct{ *CordonError }

// TooLargeError is 413: a request over the server's bounds (a command's
// stdin, an upload).
type TooLargeError struct{ *CordonError }

// ApprovalRequiredError is 423: the step is held for a person. Send the
// very same request again once ApprovalID is approved.
type ApprovalRequiredError struct {
	*CordonError
	ApprovalID string
}

// RateLimitError is 429, still, after the RetryPolicy's tries:
// RetryAfter is the wait the server asked for last.
type RateLimitError struct {
	*CordonError
	RetryAfter time.Duration
}

func (e *AuthError) Unwrap() error             { return e.CordonError }
func (e *ForbiddenError) Unwrap() error        { return e.CordonError }
func (e *NotFoundError) Unwrap() error         { return e.CordonError }
func (e *ConflictError) Unwrap() error         { return e.CordonError }
func (e *SandboxEndedError) Unwrap() error     { return e.CordonError }
func (e *TooLargeError) Unwrap() error         { return e.CordonError }
func (e *ApprovalRequiredError) Unwrap() error { return e.CordonError }
func (e *RateLimitError) Unwrap() error        { return e.CordonError }

// answerError is the error of an answer with HTTP status: the type of its
// status, else a *CordonError.
func answerError(status int, message, sandbox, approval string, retryAfter time.Duration) error {
	base := &CordonError{HTTPStatus: status, Message: message, SandboxID: sandbox}
	switch status {
	case http.StatusUnauthorized:
		return &AuthError{base}
	case http.StatusForbidden:
		return &ForbiddenError{base}
	case http.StatusNotFound:
		return &NotFoundError{base}
	case http.StatusConflict:
		return &ConflictError{base}
	case http.StatusGone:
		return &SandboxEndedError{base}
	case http.StatusRequestEntityTooLarge:
		return &TooLargeError{base}
	case http.StatusLocked:
		return &ApprovalRequiredError{base, approval}
	case http.StatusTooManyRequests:
		return &RateLimitError{base, retryAfter}
	}
	return base
}

// IsStatus reports whether err is the server's answer with that status.
func IsStatus(err error, status int) bool {
	var e *CordonError
	return errors.As(err, &e) && e.HTTPStatus == status
}

// IsNotFound reports whether err is the server's 404: no such sandbox
// (or not the token's), no such file.
func IsNotFound(err error) bool { return IsStatus(err, http.StatusNotFound) }

// IsAuth reports whether err is the server's refusal of the token: 401
// (no valid token) or 403 (not this token's to do).
func IsAuth(err error) bool {
	return IsStatus(err, http.StatusUnauthorized) || IsStatus(err, http.StatusForbidden)
}

// CommandExitError is a command that ran and did not end with status ok:
// its result (Status, ExitCode, Stdout, Stderr, Outcome) is promoted.
type CommandExitError struct {
	*CommandResult
	*CordonError
}

func (e *CommandExitError) Unwrap() error { return e.CordonError }

// LimitError is a command that a limit ended (timeout, output, memory,
// pids, cpu_time, file_size, the egress budget, ...): Limit names it when
// the outcome does. errors.As finds its CommandExitError too.
type LimitError struct{ *CommandExitError }

// Limit is the limit that ended the command, nil when the outcome names
// none (an egress budget used up).
func (e *LimitError) Limit() *Limit { return e.Outcome.Limit }

func (e *LimitError) Unwrap() error { return e.CommandExitError }

// resultError is the error of a command's result: nil for status ok.
func resultError(res *CommandResult, sandbox string) error {
	o := res.Outcome
	if o.Status == StatusOK {
		return nil
	}
	ce := &CommandExitError{res, &CordonError{Message: fmt.Sprintf("cordon: command ended with %s: %s", o.Status, o.Message), SandboxID: sandbox}}
	if o.Limit != nil || limitStatuses[o.Status] {
		return &LimitError{ce}
	}
	return ce
}
