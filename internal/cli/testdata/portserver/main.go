// Command portserver is a server that the tests of cordon serve start
// inside a sandbox, to reach through its forwarded ports: on 127.0.0.1 at
// the port given, /hello answers with the request's method, path, query
// and whether an Authorization or Cookie header came, and /echo echoes
// WebSocket messages.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/coder/websocket"
)

func main() {
	http.HandleFunc("/hello/", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "planted", Value: "1"})
		fmt.Fprintf(w, "%s %s %s authorization=%q cookie=%q host=%s\n", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Host)
	})
	http.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			typ, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			ws.Write(context.Background(), typ, append([]byte("echo: "), b...))
		}
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
