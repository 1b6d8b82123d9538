package profile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var sizeUnits = []struct {
	name string
	mult float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30}, {"t", 1 << 40}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size such as "256MiB", "1.5G" or "4096".
func ParseSize(text string) (int64, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.name) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.name)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size (write e.g. 512MiB, 1.5GiB or a number of bytes)", text)
	}
	if f < 0 {
		return 0, fmt.Errorf("%q: size cannot be negative", text)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: size too large", text)
	}
	return int64(v), nil
}

// FormatSize prints n bytes in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
