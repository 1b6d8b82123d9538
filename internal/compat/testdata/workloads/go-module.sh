# proves: the Go toolchain works on a fresh home (an empty module cache): a
# module dependency is downloaded from the Go module proxy through cordon's
# egress proxy with only proxy.golang.org:443 allowed (its checksum verified
# against the checksum database, which the proxy also serves), compiled with
# the project, and go vet, go test and go build (which stamps the binary with
# version control information when it finds a repository) pass. The standard
# library comes compiled in a build cache in the workspace (GOCACHE, as a CI
# cache would give it), so that the suite stays short.
set -eux
# The default profile's PATH does not name Go's own directory.
command -v go > /dev/null || PATH=/usr/local/go/bin:$PATH
go version
go mod init example.com/compat
cat > main.go <<'GO'
package main

import (
	"fmt"

	"github.com/google/uuid"
)

func id() string { return uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://example.com")).String() }

func main() { fmt.Println(id()) }
GO
cat > main_test.go <<'GO'
package main

import "testing"

func TestID(t *testing.T) {
	if got, want := id(), "4fd35a71-71ef-5a55-a9d9-aa75c889a6d0"; got != want {
		t.Fatalf("id() = %s, want %s", got, want)
	}
}
GO
go get github.com/google/uuid@v1.6.0
grep -q 'github.com/google/uuid v1.6.0' go.sum
go vet ./...
go test -count=1 ./...
go build -o app .
./app | grep -qx 4fd35a71-71ef-5a55-a9d9-aa75c889a6d0
