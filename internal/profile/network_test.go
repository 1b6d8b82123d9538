package profile

import (
	"errors"
	"strings"
	"testing"
)

// network.budget: each budget parses as its kind; max_denied has a finite
// default, the others none.
func TestNetworkBudget(t *testing.T) {
	p, err := Parse("p.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	b := p.Network.Budget
	if !b.MaxDenied.Set() || b.MaxDenied.N != 100 || b.Value("max_denied") != DefaultMaxDenied {
		t.Errorf("default max_denied: %+v %q", b.MaxDenied, b.Value("max_denied"))
	}
	if b.Connections.Set() || b.BytesOut.Set() || b.BytesIn.Set() {
		t.Errorf("other budgets set by default: %+v", b)
	}

	p, err = Parse("p.yaml", []byte(minimal+"network:\n  budget:\n    bytes_out: 1MiB\n    connections: 20\n    max_denied: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	b = p.Network.Budget
	if b.MaxDenied.N != 7 || b.Value("max_denied") != "7" || b.Connections.N != 20 || b.Value("bytes_out") != "1MiB" {
		t.Errorf("budget %+v", b)
	}
	// Set in code before validation, as a caller may.
	p.Network.Budget.MaxDenied = Quantity{N: 3}
	if errs := p.validate(nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if p.Network.Budget.Value("max_denied") != "3" {
		t.Errorf("set in code: %q", p.Network.Budget.Value("max_denied"))
	}

	p, err = Parse("p.yaml", []byte(minimal+"network:\n  budget:\n    max_denied: unlimited\n"))
	if err != nil || !p.Network.Budget.MaxDenied.Unlimited || p.Network.Budget.MaxDenied.Set() {
		t.Errorf("unlimited: %v %+v", err, p.Network.Budget.MaxDenied)
	}

	for _, tt := range []struct{ value, msg string }{
		{"0", "below the smallest max_denied"},
		{"many", "not a whole number"},
		{"-1", "below the smallest"},
	} {
		_, err := Parse("p.yaml", []byte(minimal+"network:\n  budget:\n    max_denied: "+tt.value+"\n"))
		var errs Errors
		if !errors.As(err, &errs) || errs[0].Field != "network.budget.max_denied" || !strings.Contains(errs[0].Msg, tt.msg) {
			t.Errorf("max_denied %s: %v, want %q", tt.value, err, tt.msg)
		}
	}
}
