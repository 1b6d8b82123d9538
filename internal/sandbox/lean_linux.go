package sandbox

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// leanFS carries the lean sandbox program (see package sandbox/lean) when
// cordon was built with it (build.sh); a plain go build carries none.
//
//go:embed leanbin
var leanFS embed.FS

const leanName = "leanbin/cordon-sandbox"

// leanHelper is the sealed in-memory copy of the lean program, made once per
// process and shared by every sandbox it starts; nil without one.
var leanHelper = sync.OnceValues(func() (*os.File, error) {
	src, err := leanFS.Open(leanName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the sandbox program: %w", err)
	}
	defer src.Close()
	return sealed("cordon-sandbox", func(dst *os.File) error {
		_, err := io.Copy(dst, src)
		return err
	})
})

// helperPath is what cordon starts its helpers outside the sandbox from
// (the cleanup helper, the id-mapping helper): the lean program when cordon
// carries one, else cordon itself.
func helperPath() string {
	if f, err := leanHelper(); err == nil && f != nil {
		return fdPath(f)
	}
	return "/proc/self/exe"
}

// fdPath names an open file for exec.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// LeanHelper reports whether this cordon carries the lean sandbox program,
// and why not if it cannot use it.
func LeanHelper() (bool, error) {
	f, err := leanHelper()
	return f != nil, err
}
