package protect

import "github.com/cordon-sandbox/cordon/internal/bincode"

// The index and search cache files are written with package bincode: no
// reflection, so reading them costs a run nothing at start-up, and a file
// of another format or version does not decode (its reader does without).

const (
	indexMagic  = "cordon walk index 1\n"
	searchMagic = "cordon search cache 1\n"
)

func encodeDirs(e *bincode.Encoder, m map[string]dirMark) {
	e.Uint(uint64(len(m)))
	for k, v := range m {
		e.String(k)
		e.Uint(v.Ino)
		e.Int(v.Ctime)
	}
}

func decodeDirs(d *bincode.Decoder) map[string]dirMark {
	n := d.Count(3)
	m := make(map[string]dirMark, bincode.Prealloc(n))
	for range n {
		k := d.String()
		m[k] = dirMark{Ino: d.Uint(), Ctime: d.Int()}
	}
	return m
}

func (ix *walkIndex) encode() []byte {
	e := &bincode.Encoder{B: []byte(indexMagic)}
	e.String(ix.Root)
	e.Uint(ix.Dev)
	e.Uint(ix.Ino)
	encodeDirs(e, ix.Dirs)
	e.Uint(uint64(len(ix.Watch)))
	for k, v := range ix.Watch {
		e.String(k)
		e.Bool(v)
	}
	e.Uint(uint64(len(ix.Creds)))
	for k, v := range ix.Creds {
		e.String(k)
		e.String(v)
	}
	return e.B
}

func (ix *walkIndex) decode(b []byte) error {
	d := &bincode.Decoder{B: b}
	d.Magic(indexMagic)
	ix.Root, ix.Dev, ix.Ino = d.String(), d.Uint(), d.Uint()
	ix.Dirs = decodeDirs(d)
	n := d.Count(2)
	ix.Watch = make(map[string]bool, bincode.Prealloc(n))
	for range n {
		k := d.String()
		ix.Watch[k] = d.Bool()
	}
	n = d.Count(2)
	ix.Creds = make(map[string]string, bincode.Prealloc(n))
	for range n {
		k := d.String()
		ix.Creds[k] = d.String()
	}
	return d.End()
}

func (c *searchCache) encode() []byte {
	e := &bincode.Encoder{B: []byte(searchMagic)}
	e.String(c.Root)
	e.Uint(c.Dev)
	e.Uint(c.Ino)
	e.String(c.Key)
	encodeDirs(e, c.Dirs)
	e.Uint(uint64(len(c.Found)))
	for _, f := range c.Found {
		e.String(f.Rel)
		e.String(f.Cred.Path)
		e.Bool(f.Cred.Store)
		e.Bool(f.Cred.FileOnly)
		e.String(f.Cred.Why)
		e.Bool(f.Home)
		e.Bool(f.Dir)
		e.Bool(f.Link)
		e.String(f.SameAs)
	}
	return e.B
}

func (c *searchCache) decode(b []byte) error {
	d := &bincode.Decoder{B: b}
	d.Magic(searchMagic)
	c.Root, c.Dev, c.Ino, c.Key = d.String(), d.Uint(), d.Uint(), d.String()
	c.Dirs = decodeDirs(d)
	n := d.Count(9)
	c.Found = make([]Found, 0, bincode.Prealloc(n))
	for range n {
		var f Found
		f.Rel, f.Cred.Path = d.String(), d.String()
		f.Cred.Store, f.Cred.FileOnly = d.Bool(), d.Bool()
		f.Cred.Why = d.String()
		f.Home, f.Dir, f.Link = d.Bool(), d.Bool(), d.Bool()
		f.SameAs = d.String()
		c.Found = append(c.Found, f)
	}
	return d.End()
}
