package protect

import (
	"reflect"
	"testing"

	"github.com/cordon-sandbox/cordon/internal/bincode"
)

func TestCacheFilesRoundTrip(t *testing.T) {
	ix := &walkIndex{Root: "/w", Dev: 7, Ino: 9,
		Dirs:  map[string]dirMark{"": {Ino: 9, Ctime: -5}, "a/b": {Ino: 1 << 40, Ctime: 1 << 62}},
		Watch: map[string]bool{".git": true, "x": false},
		Creds: map[string]string{".ssh": "ssh keys"}}
	var ix2 walkIndex
	if err := ix2.decode(ix.encode()); err != nil || !reflect.DeepEqual(ix, &ix2) {
		t.Fatalf("walk index: %v\n%+v\n%+v", err, ix, &ix2)
	}
	c := &searchCache{Root: "/p", Dev: 1, Ino: 2, Key: "k", Dirs: map[string]dirMark{"d": {3, 4}},
		Found: []Found{{Rel: "a/.npmrc", Cred: Credential{Path: ".npmrc", FileOnly: true, Why: "tokens"}, Link: true, SameAs: "b"}, {Rel: "h", Home: true, Dir: true}}}
	var c2 searchCache
	if err := c2.decode(c.encode()); err != nil || !reflect.DeepEqual(c, &c2) {
		t.Fatalf("search cache: %v\n%+v\n%+v", err, c, &c2)
	}
}

// Every cut of a file, every file of the other kind, and a file whose
// counts claim more than it holds are refused, never a panic or a huge
// allocation.
func TestCacheFilesRefuseDamage(t *testing.T) {
	ix := (&walkIndex{Root: "/w", Dirs: map[string]dirMark{"a": {1, 2}}, Watch: map[string]bool{"b": true}, Creds: map[string]string{"c": "d"}}).encode()
	sc := (&searchCache{Root: "/w", Found: []Found{{Rel: "x"}}}).encode()
	for n := range len(ix) {
		if (&walkIndex{}).decode(ix[:n]) == nil {
			t.Errorf("walk index cut to %d bytes decoded", n)
		}
	}
	for n := range len(sc) {
		if (&searchCache{}).decode(sc[:n]) == nil {
			t.Errorf("search cache cut to %d bytes decoded", n)
		}
	}
	if (&walkIndex{}).decode(sc) == nil || (&searchCache{}).decode(ix) == nil {
		t.Error("a file of the other kind decoded")
	}
	if (&walkIndex{}).decode(append(ix, 0)) == nil {
		t.Error("a file with bytes after its end decoded")
	}
	huge := &bincode.Encoder{B: []byte(indexMagic)}
	huge.String("/w")
	huge.Uint(0)
	huge.Uint(0)
	huge.Uint(1 << 60) // directories claimed
	if (&walkIndex{}).decode(huge.B) == nil {
		t.Error("a count larger than the file decoded")
	}
}
