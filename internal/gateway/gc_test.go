package gateway_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/gateway"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if v, ok := os.LookupEnv(name); ok {
			defer os.Setenv(name, v)
			os.Unsetenv(name)
		}
	}
	gateway.TuneGC()
	if got := debug.SetGCPercent(100); got != gateway.RelayGCPercent {
		t.Errorf("GC percent %d, want %d", got, gateway.RelayGCPercent)
	}
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run("with "+name, func(t *testing.T) {
			t.Setenv(name, map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}[name])
			debug.SetGCPercent(100)
			gateway.TuneGC()
			if got := debug.SetGCPercent(100); got != 100 {
				t.Errorf("GC percent %d: the user's %s was overridden", got, name)
			}
		})
	}
}
