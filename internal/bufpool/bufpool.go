// Package bufpool lends the 32 KiB buffers that a command's output passes
// through on its way to a client: a server running many short commands
// reuses them instead of allocating fresh memory for each, which the
// runtime would clear and the kernel fault in again every time.
//
// A buffer comes back holding whatever its last user left in it: use only
// the bytes you read into it.
package bufpool

import "sync"

// Size is the size of every buffer.
const Size = 32 << 10

var pool = sync.Pool{New: func() any { return new([Size]byte) }}

// Get lends a buffer.
func Get() *[Size]byte { return pool.Get().(*[Size]byte) }

// Put returns b; nothing may use it after.
func Put(b *[Size]byte) { pool.Put(b) }
