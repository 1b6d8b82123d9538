package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
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
		{"only seccomp allowed", map[string]bool{LayerSeccomp: true}, "landlock: Landlock is not available in this kernel; refusing to run without it (--allow-degraded=landlock runs anyway)", nil},
		{"both allowed", map[string]bool{LayerSeccomp: true, LayerLandlock: true}, "", []string{LayerSeccomp, LayerLandlock}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &Spec{Seccomp: true, Landlock: true}
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
	spec := &Spec{Seccomp: true, Landlock: true}
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
	spec := &Spec{Seccomp: true, Landlock: true}
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
	f, err := sealedSelf()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("wrote to the sealed copy")
	}
	if err := f.Truncate(0); err == nil {
		t.Fatal("truncated the sealed copy")
	}
	if f.Fd() < 100 {
		t.Errorf("descriptor %d is low enough to be overwritten by the child's", f.Fd())
	}
	name, _ := readlink(f)
	if !strings.HasPrefix(name, "/memfd:cordon") {
		t.Errorf("not a memfd: %s", name)
	}
}

func readlink(f interface{ Fd() uintptr }) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
}
