#!/usr/bin/env bash
# Build cordon's release binaries: static (no cgo), stripped, with no path,
# build ID or VCS stamp of the machine that built them, so that the same
# source, version and Go toolchain give the same bytes anywhere. Writes
# cordon-VERSION-linux-ARCH for each platform, the SDKs as pip and npm
# install them offline (release/sdk.sh) and SHA256SUMS into DIR.
#
# usage: release/build.sh [-o DIR] VERSION
#   VERSION   the version the binaries report (v1.2.3, v1.3.0-rc.1)
#   -o DIR    where to write them (default: dist, under the repository)
# Environment: PLATFORMS (default "linux/amd64 linux/arm64").
set -euo pipefail

usage() {
	echo "usage: release/build.sh [-o DIR] VERSION" >&2
	exit 2
}

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/dist
while getopts o: opt; do
	case $opt in
	o) out=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
version=$1
if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release/build.sh: version $version is not a semantic version with a leading v (v1.2.3, v1.3.0-rc.1)" >&2
	exit 2
fi
platforms=${PLATFORMS:-linux/amd64 linux/arm64}

mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"

# Everything that changes the bytes is set here, not taken from the
# caller's environment or go env file: no cgo, the baseline instruction set
# of each architecture, the Go toolchain on PATH (go.mod names the version),
# the module graph as go.sum pins it.
export CGO_ENABLED=0 GOAMD64=v1 GOARM64=v8.0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOEXPERIMENT=
ldflags="-s -w -buildid= -X github.com/cordon-sandbox/cordon/internal/version.Version=$version"

bins=()
for p in $platforms; do
	goos=${p%/*} goarch=${p#*/}
	bin=cordon-$version-$goos-$goarch
	GOOS=$goos GOARCH=$goarch ./build.sh -o "$out/$bin" -trimpath -buildvcs=false -ldflags="$ldflags"
	bins+=("$bin")
done
mapfile -t sdks < <(bash "$root/release/sdk.sh" -o "$out" "$version")
(cd "$out" && sha256sum "${bins[@]}" "${sdks[@]}" >SHA256SUMS)
echo "built with $(go version) into $out:"
cat "$out/SHA256SUMS"
