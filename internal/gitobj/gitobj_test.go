package gitobj

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func deflate(s string) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func object(typ, body string) []byte {
	return deflate(fmt.Sprintf("%s %d\x00%s", typ, len(body), body))
}

func TestCommit(t *testing.T) {
	tree := strings.Repeat("a", 40)
	body := "tree " + tree + "\nparent " + strings.Repeat("b", 40) + "\nauthor A U <a@x> 1700000000 +0000\ncommitter C <c@x> 1 +0000\n\nsubject line\n\nbody\n"
	typ, got, err := Read(object("commit", body), 1<<20)
	if err != nil || typ != "commit" {
		t.Fatal(typ, err)
	}
	c, err := ParseCommit(got)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tree != tree || len(c.Parents) != 1 || c.Author != "A U <a@x>" || c.Subject != "subject line" {
		t.Errorf("%+v", c)
	}
	if _, err := ParseCommit([]byte("tree x\n\nmsg")); err == nil {
		t.Error("a commit without a valid tree was read")
	}
}

// A small object that inflates to a large one is cut at the bound.
func TestBomb(t *testing.T) {
	bomb := deflate("blob 1000000000\x00" + strings.Repeat("\x00", 64<<20))
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if _, _, err := Read(bomb, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("err %v, want ErrTooLarge", err)
	}
	for _, bad := range [][]byte{[]byte("not zlib"), deflate("blob 3\x00ab"), deflate("evil 1\x00a"), deflate("noheader")} {
		if _, _, err := Read(bad, 1<<20); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}

func TestTree(t *testing.T) {
	id := bytes.Repeat([]byte{0xab}, 20)
	body := "100644 a.txt\x00" + string(id) + "40000 dir\x00" + string(id)
	es, err := ParseTree([]byte(body), 20, 10)
	if err != nil || len(es) != 2 || es[0].Name != "a.txt" || !es[1].Tree() || es[0].ID != strings.Repeat("ab", 20) {
		t.Fatalf("%+v %v", es, err)
	}
	if _, err := ParseTree([]byte(body[:len(body)-1]), 20, 10); err == nil {
		t.Error("a truncated tree was read")
	}
	if _, err := ParseTree([]byte(body), 20, 1); err == nil {
		t.Error("a tree past the bound was read")
	}
}

func FuzzRead(f *testing.F) {
	f.Add(object("commit", "tree "+strings.Repeat("a", 40)+"\n\nx"))
	f.Add(object("tree", "100644 a\x00"+strings.Repeat("\x01", 20)))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, body, err := Read(b, 1<<16)
		if err != nil {
			return
		}
		switch typ {
		case "commit":
			ParseCommit(body)
		case "tree":
			ParseTree(body, 20, 1000)
		}
	})
}
