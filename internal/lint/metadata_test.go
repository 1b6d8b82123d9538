package lint

import (
	"testing"

	"github.com/cordon-sandbox/cordon/internal/egress"
)

func TestMetadataReasons(t *testing.T) {
	for dest, want := range map[string]string{
		"169.254.169.254:80":         "is the cloud instance metadata service (AWS, GCP, Azure, OpenStack and others), which hands out the host's credentials",
		"[::ffff:169.254.169.254]":   "is the cloud instance metadata service (AWS, GCP, Azure, OpenStack and others), which hands out the host's credentials",
		"[fd00:ec2::254]:80":         "is the AWS instance metadata service over IPv6, which hands out the host's credentials",
		"100.100.100.200":            "is the Alibaba Cloud metadata service, which hands out the host's credentials",
		"metadata.google.internal.":  "is the GCP metadata service, which hands out the host's credentials",
		"169.254.1.1":                "is IPv4 link-local, where cloud metadata services and the host's own link answer",
		"[fe80::1]:22":               "is IPv6 link-local, where the host's own link answers",
		"169.254.0.0/16":             "includes 169.254.169.254/32: the cloud instance metadata service (AWS, GCP, Azure, OpenStack and others), which hands out the host's credentials",
		"100.64.0.0/10":              "includes 100.100.100.200/32: the Alibaba Cloud metadata service, which hands out the host's credentials",
		"*.ec2.internal:80":          "includes instance-data.ec2.internal: the AWS instance metadata service, which hands out the host's credentials",
		"169.253.255.255":            "",
		"api.github.com:443":         "",
		"[fe00::1]":                  "",
		"metadata.google.internal.x": "",
	} {
		rule, err := egress.ParseRule(dest, false)
		if err != nil {
			t.Fatalf("%s: %v", dest, err)
		}
		if got := metadata(rule); got != want {
			t.Errorf("%s: got %q, want %q", dest, got, want)
		}
	}
}
