//go:build linux

package protect

import (
	"sync"
	"testing"
)

// Runs in the same workspace plan at once: one removing its placeholders
// while another plans makes the other plan again, never fail it.
func TestMakeConcurrent(t *testing.T) {
	root := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p, err := Make(root, Options{})
				if err != nil {
					errs <- err
					return
				}
				p.Remove()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
