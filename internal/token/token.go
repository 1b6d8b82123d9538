// Package token makes and checks cordon's bearer tokens: a token is given
// once to its holder, and only its SHA-256 is kept in a configuration
// (cordon serve's tokens, and the approvers and MCP clients of cordon's
// configuration), with a name that says whose it is.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// Prefix starts every token cordon makes, so that one found in a log or a
// repository is recognised.
const Prefix = "cordon_"

// New makes a token and returns it with its SHA-256, the form a
// configuration keeps.
func New() (token, sum string) {
	b := make([]byte, 32)
	rand.Read(b)
	token = Prefix + hex.EncodeToString(b)
	return token, Hash(token)
}

// Hash returns the hex SHA-256 of a token.
func Hash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// ValidSum reports whether s is a SHA-256 in lower-case hex.
func ValidSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Match returns the index of the sum among sums that the presented token
// hashes to, or -1 (always for an empty token). Every sum is compared, in
// constant time.
func Match(presented string, sums []string) int {
	presented = strings.TrimSpace(presented)
	if presented == "" {
		return -1
	}
	sum := []byte(Hash(presented))
	found := -1
	for i, s := range sums {
		if subtle.ConstantTimeCompare(sum, []byte(s)) == 1 {
			found = i
		}
	}
	return found
}

// Bearer is the token an Authorization header's value carries with the
// scheme Bearer, which is matched in any case (RFC 7235: "bearer", "BEARER"
// are the same scheme); ok is false for another scheme or none. Every
// place that identifies a request by its token reads it here, so that no
// count of a caller's sessions or requests misses a spelling another place
// accepts.
func Bearer(authorization string) (tok string, ok bool) {
	scheme, t, found := strings.Cut(strings.TrimSpace(authorization), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(t), true
}
