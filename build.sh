#!/bin/sh
# Build cordon with its lean sandbox program inside (see
# internal/sandbox/lean): each sandbox's init and cleanup helper then start
# without the packages of cordon's command line. A plain
# `go build ./cmd/cordon` works too, and its sandboxes start cordon itself.
#
# usage: ./build.sh [-o OUT] [GO BUILD FLAGS...]
#   -o OUT   the binary to write (default: cordon, in the current directory)
#   flags    passed to both builds (default: -trimpath -ldflags="-s -w")
# Environment: CGO_ENABLED (default 0), GOOS, GOARCH and the rest of go's.
set -eu

out=cordon
if [ "${1:-}" = -o ]; then
	[ $# -ge 2 ] || { echo "usage: ./build.sh [-o OUT] [GO BUILD FLAGS...]" >&2; exit 2; }
	out=$2
	shift 2
fi
case $out in /*) ;; *) out=$PWD/$out ;; esac
[ $# -gt 0 ] || set -- -trimpath "-ldflags=-s -w"

root=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
export CGO_ENABLED="${CGO_ENABLED:-0}"

go build "$@" -o "$tmp/cordon-sandbox" ./internal/sandbox/lean
# The program reaches the embedded directory through an overlay, so the
# tree is never written and a stale program can never be embedded.
case $root$tmp in *'"'* | *'\'*)
	echo "build.sh: cannot build in a path holding a quote or a backslash" >&2
	exit 2
	;;
esac
# Its digest names the copy a root cordon shares between sandboxes.
sha256sum "$tmp/cordon-sandbox" | cut -d' ' -f1 >"$tmp/cordon-sandbox.sha256"
lean=$root/internal/sandbox/leanbin/cordon-sandbox
printf '{"Replace":{"%s":"%s","%s.sha256":"%s.sha256"}}\n' "$lean" "$tmp/cordon-sandbox" "$lean" "$tmp/cordon-sandbox" >"$tmp/overlay.json"
go build "$@" -overlay "$tmp/overlay.json" -o "$out" ./cmd/cordon
