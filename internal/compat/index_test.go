package compat_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"testing"
)

// The package the Python index serves: one pure-Python wheel with a module
// and a console script.
const (
	wheelProject = "cordon-compat-hello"
	wheelFile    = "cordon_compat_hello-1.0-py3-none-any.whl"
)

// buildWheel makes the wheel, RECORD and all, as a build backend would.
func buildWheel() ([]byte, error) {
	const info = "cordon_compat_hello-1.0.dist-info/"
	files := []struct{ name, body string }{
		{"cordon_compat_hello.py", "def greet(who):\n    return 'hello, ' + who\n\n\ndef main():\n    print(greet('world'))\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + wheelProject + "\nVersion: 1.0\nSummary: A package for cordon's compatibility suite\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: cordon-compat\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{info + "entry_points.txt", "[console_scripts]\ncordon-compat-hello = cordon_compat_hello:main\n"},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record bytes.Buffer
	for _, f := range files {
		w, err := z.Create(f.name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, err := z.Create(info + "RECORD")
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(record.Bytes()); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// serveIndex serves a PEP 503 simple index holding the wheel on a loopback
// port of the host, until the test ends, and returns its address.
func serveIndex(t *testing.T) string {
	t.Helper()
	wheel, err := buildWheel()
	if err != nil {
		t.Fatalf("building the wheel: %v", err)
	}
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"%s/\">%s</a></body></html>\n", wheelProject, wheelProject)
	})
	mux.HandleFunc("GET /simple/"+wheelProject+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"%s#sha256=%s\">%s</a></body></html>\n", wheelFile, hex.EncodeToString(sum[:]), wheelFile)
	})
	mux.HandleFunc("GET /simple/"+wheelProject+"/"+wheelFile, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(wheel)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("the package index: %v", err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
