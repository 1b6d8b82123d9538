package server

import (
	"embed"
	"net/http"
)

// The web page: pending approvals, sandboxes and their sessions, and an
// audit review of a sandbox with what the agent did beside what it was
// shown. The files are public; everything they show comes from the API
// with the token the person enters, and is put on the page as text only.
//
//go:embed ui
var uiFiles embed.FS

// uiPolicy lets the page load only its own script and style, and talk only
// to this server.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

func (s *Server) uiRoutes() {
	s.handle("GET /favicon.ico", public, func(w http.ResponseWriter, r *http.Request, c caller) int {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	})
	for pattern, file := range map[string]string{
		"GET /{$}":          "ui/index.html",
		"GET /ui/app.js":    "ui/app.js",
		"GET /ui/style.css": "ui/style.css",
	} {
		s.handle(pattern, public, func(w http.ResponseWriter, r *http.Request, c caller) int {
			data, err := uiFiles.ReadFile(file)
			if err != nil {
				return fail(w, http.StatusNotFound, "%v", err)
			}
			h := w.Header()
			h.Set("Content-Security-Policy", uiPolicy)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cache-Control", "no-store")
			switch {
			case len(file) > 3 && file[len(file)-3:] == ".js":
				h.Set("Content-Type", "text/javascript; charset=utf-8")
			case len(file) > 4 && file[len(file)-4:] == ".css":
				h.Set("Content-Type", "text/css; charset=utf-8")
			default:
				h.Set("Content-Type", "text/html; charset=utf-8")
			}
			w.Write(data)
			return http.StatusOK
		})
	}
}
