package egress

import (
	"bufio"
	"io"
	"sync"
)

// copyBuf is the size of the buffers tunnels copy through where the kernel
// cannot move the bytes.
const copyBuf = 32 << 10

// Buffers are reused across connections, so that a proxy carrying many
// short ones does not allocate and clear them for each.
var (
	copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}
	heads    = sync.Pool{New: func() any { b := make([]byte, 0, clientBuf); return &b }}
	readers  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, clientBuf) }}
)

func getCopyBuf() *[]byte  { return copyBufs.Get().(*[]byte) }
func putCopyBuf(b *[]byte) { copyBufs.Put(b) }

// getHead returns an empty buffer for a request head.
func getHead() *[]byte { return heads.Get().(*[]byte) }

// putHead keeps head's buffer for the next request head, unless it grew
// past what most heads need.
func putHead(b *[]byte, head []byte) {
	if cap(head) <= 2*clientBuf {
		*b = head[:0]
		heads.Put(b)
	}
}

// getReader returns a reader of r with a buffer of clientBuf bytes.
func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// putReader keeps br for reuse; nothing may read it after.
func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}
