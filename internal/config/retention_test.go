package config

import (
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/internal/audit"
)

// cordon run's retention has cordon serve's defaults, "off", and its
// bounds.
func TestRetentionPolicy(t *testing.T) {
	p, err := Retention{}.Policy("/etc/cordon")
	if err != nil || p.MaxBytes != audit.DefaultRetentionBytes || p.MaxAge != audit.DefaultRetentionAge || p.Archive != "" {
		t.Errorf("defaults: %+v %v", p, err)
	}
	p, err = Retention{MaxBytes: "off", MaxAge: "30d", Archive: "old"}.Policy("/etc/cordon")
	if err != nil || p.MaxBytes != 0 || p.MaxAge != 30*24*time.Hour || p.Archive != "/etc/cordon/old" {
		t.Errorf("set: %+v %v", p, err)
	}
	for _, r := range []Retention{{MaxBytes: "1KiB"}, {MaxAge: "5m"}, {MaxAge: "0d"}} {
		if _, err := r.Policy(""); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}
