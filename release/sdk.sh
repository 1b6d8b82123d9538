#!/usr/bin/env bash
# Pack cordon's SDKs as a release ships them, installable with no package
# index reachable:
#   cordon_sandbox-PYVERSION-py3-none-any.whl and cordon_sandbox-PYVERSION.tar.gz
#       (pip install FILE), built by the package's own backend
#       (sdk/python/_build), which needs only Python's standard library;
#   cordon-sandbox-sdk-VERSION.tgz (npm install FILE), packed by npm pack.
# Both carry the release's version (v1.3.0-rc.1 is 1.3.0rc1 for pip,
# 1.3.0-rc.1 for npm) and the same bytes for the same sources.
#
# usage: release/sdk.sh [-o DIR] VERSION   (default DIR: dist)
# Needs python3 (3.11 or later) and npm.
set -euo pipefail

usage() {
	echo "usage: release/sdk.sh [-o DIR] VERSION" >&2
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
if ! [[ $version =~ ^v((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*))(-([0-9A-Za-z.-]+))?$ ]]; then
	echo "release/sdk.sh: version $version is not a semantic version with a leading v (v1.2.3, v1.3.0-rc.1)" >&2
	exit 2
fi
release=${BASH_REMATCH[1]} pre=${BASH_REMATCH[6]}
for tool in python3 npm; do
	if ! command -v $tool >/dev/null; then
		echo "release/sdk.sh: $tool is needed to pack the SDKs and is not on PATH" >&2
		exit 1
	fi
done

# pip's spelling of the version (PEP 440): alpha.N, beta.N and rc.N are
# pre-releases; any other suffix is a local label.
npmversion=${version#v}
pyversion=$release
if [[ $pre =~ ^(alpha|a|beta|b|rc)\.?([0-9]+)$ ]]; then
	case ${BASH_REMATCH[1]} in
	alpha | a) pyversion+=a ;;
	beta | b) pyversion+=b ;;
	rc) pyversion+=rc ;;
	esac
	pyversion+=${BASH_REMATCH[2]}
elif [ -n "$pre" ]; then
	local=$(printf '%s' "$pre" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '.')
	pyversion+=+$local
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
# One date for every file in the archives: the commit's when there is one.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}

# Python: the wheel and the source archive, from the package's own backend.
(
	cd "$root/sdk/python"
	CORDON_SDK_VERSION=$pyversion PYTHONDONTWRITEBYTECODE=1 python3 -c '
import sys
sys.path.insert(0, "_build")
import cordon_build
print(cordon_build.build_wheel(sys.argv[1]))
print(cordon_build.build_sdist(sys.argv[1]))
' "$out" >/dev/null
)

# TypeScript: npm pack of a copy carrying the version; npm pack needs no
# registry and gives every file one date.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$root/sdk/typescript/package.json" "$root/sdk/typescript/index.js" "$root/sdk/typescript/index.d.ts" "$root/sdk/typescript/README.md" "$root/LICENSE" "$stage/"
node -e '
const fs = require("fs");
const p = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
p.version = process.argv[2];
delete p.devDependencies;
delete p.scripts;
fs.writeFileSync(process.argv[1], JSON.stringify(p, null, 2) + "\n");
' "$stage/package.json" "$npmversion"
(cd "$stage" && npm pack --silent --pack-destination "$out" --cache "$stage/.npm" --offline >/dev/null)

echo "cordon_sandbox-$pyversion-py3-none-any.whl"
echo "cordon_sandbox-$pyversion.tar.gz"
echo "cordon-sandbox-sdk-$npmversion.tgz"
