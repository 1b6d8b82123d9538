package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

func TestMissingLayersFailClosed(t *testing.T) {
	defer func(s func() error, l func() int) { seccompAvailable, landlockABI = s, l }(seccompAvailable, landlockABI)
	seccompAvailable = func() error { return errors.New("no seccomp here") }
	landlockABI = func() int { return 0 }

	tests := []struct {
		name      string
		allow     map[string]bool
		wantErr   string
		wantSkips []string
	}{
		{"nothing allowed", nil, "seccomp: no seccomp here; refusing to run without it (--allow-degraded=seccomp runs anyway)", nil},
		{"only seccomp allowed", map[string]bool{LayerSeccomp: true}, "landlock: the kernel has no Landlock; refusing to run without it (--allow-degraded=landlock runs anyway)", nil},
		{"both allowed", map[string]bool{LayerSeccomp: true, LayerLandlock: true}, "", []string{LayerSeccomp, LayerLandlock}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &Spec{Spec: wire.Spec{Seccomp: true, Landlock: true}}
			res := &Result{}
			err := checkLayers(spec, tt.allow, res)
			if tt.wantErr != "" {
				var se *SetupError
				if !errors.As(err, &se) || err.Error() != tt.wantErr {
					t.Fatalf("got %v, want setup error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.Seccomp || spec.Landlock {
				t.Errorf("layers still requested: %+v", spec)
			}
			if !slices.Equal(res.Degraded, tt.wantSkips) {
				t.Errorf("degraded: got %v, want %v", res.Degraded, tt.wantSkips)
			}
		})
	}
}

func TestOldLandlockNeedsConsent(t *testing.T) {
	defer func(s func() error, l func() int) { seccompAvailable, landlockABI = s, l }(seccompAvailable, landlockABI)
	seccompAvailable = func() error { return nil }
	landlockABI = func() int { return 3 }
	spec := &Spec{Spec: wire.Spec{Seccomp: true, Landlock: true}}
	err := checkLayers(spec, nil, &Result{})
	if err == nil || !strings.Contains(err.Error(), "ABI 3; cordon needs ABI 6") {
		t.Fatalf("got %v, want a refusal naming both ABIs", err)
	}
	res := &Result{}
	if err := checkLayers(spec, map[string]bool{LayerLandlock: true}, res); err != nil {
		t.Fatal(err)
	}
	// Allowed: Landlock still applies, with what ABI 3 offers, and the
	// outcome says so.
	if !spec.Landlock || !slices.Equal(res.Degraded, []string{"landlock (ABI 3 of 6)"}) {
		t.Errorf("got %+v, %v", spec, res.Degraded)
	}
}

func TestLayersPresentAreKept(t *testing.T) {
	defer func(s func() error, l func() int) { seccompAvailable, landlockABI = s, l }(seccompAvailable, landlockABI)
	seccompAvailable = func() error { return nil }
	landlockABI = func() int { return 7 }
	spec := &Spec{Spec: wire.Spec{Seccomp: true, Landlock: true}}
	res := &Result{}
	// Allowing degradation does not switch off a layer the host has.
	if err := checkLayers(spec, map[string]bool{LayerSeccomp: true, LayerLandlock: true}, res); err != nil {
		t.Fatal(err)
	}
	if !spec.Seccomp || !spec.Landlock || len(res.Degraded) != 0 {
		t.Errorf("got %+v, %v", spec, res.Degraded)
	}
}

func TestSealedSelfCannotBeWritten(t *testing.T) {
	f, err := sealedSelf(false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("wrote to the executable init starts from")
	}
	if err := f.Truncate(0); err == nil {
		t.Fatal("truncated the executable init starts from")
	}
	if f.Fd() < 100 {
		t.Errorf("descriptor %d is low enough to be overwritten by the child's", f.Fd())
	}
	self, _ := os.Open("/proc/self/exe")
	defer self.Close()
	name, _ := readlink(f)
	if memfd := strings.HasPrefix(name, "/memfd:cordon"); memfd == rootOwned(self) {
		t.Errorf("root-owned binary %v, yet init would start from %s", rootOwned(self), name)
	}
	c, err := sealedSelf(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if name, _ := readlink(c); !strings.HasPrefix(name, "/memfd:cordon") {
		t.Errorf("asked for a copy, got %s", name)
	}
}

// Only a binary that host root owns and nobody else may write is used as
// it is; anything else is copied and sealed.
func TestRootOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		uid  int
		mode os.FileMode
		want bool
	}{{0, 0o755, true}, {0, 0o700, true}, {0, 0o775, false}, {0, 0o757, false}, {1000, 0o755, false}, {65534, 0o555, false}} {
		p := filepath.Join(dir, fmt.Sprintf("bin-%d-%o", tt.uid, tt.mode))
		os.WriteFile(p, []byte("x"), 0o600)
		os.Chown(p, tt.uid, tt.uid)
		os.Chmod(p, tt.mode)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := rootOwned(f); got != tt.want {
			t.Errorf("uid %d mode %o: got %v", tt.uid, tt.mode, got)
		}
		f.Close()
	}
}

func readlink(f interface{ Fd() uintptr }) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
}
