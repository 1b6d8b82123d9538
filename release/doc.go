// Package release holds cordon's release build (build.sh) and the tests
// that prove what a user gets: the script gives the same bytes twice, and
// `go install github.com/cordon-sandbox/cordon/cmd/cordon@VERSION` installs
// a cordon that reports VERSION. It has no code of its own.
package release
