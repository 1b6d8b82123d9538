package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP collector in binary protobuf (the
// http/protobuf protocol), configured by the specification's environment.
type exporter struct {
	url     string
	headers map[string]string
	timeout time.Duration
	gzip    bool
	client  *http.Client

	mu      sync.Mutex
	stopped bool
}

// defaultTimeout bounds one export, as the specification's default.
const defaultTimeout = 10 * time.Second

// maxResponse bounds what is read of a collector's answer.
const maxResponse = 64 << 10

// env reads OTEL_EXPORTER_OTLP_TRACES_name, else OTEL_EXPORTER_OTLP_name.
func env(name string) string {
	if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + name))
}

// newExporter configures an exporter from the environment.
func newExporter() (*exporter, error) {
	e := &exporter{timeout: defaultTimeout}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		u, err := endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v)
		if err != nil {
			return nil, err
		}
		// A signal's own endpoint is used as it is, "/" if it has no path.
		if u.Path == "" {
			u.Path = "/"
		}
		e.url = u.String()
	} else {
		u, err := endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		if err != nil {
			return nil, err
		}
		u.Path = path.Join("/", u.Path, "v1/traces")
		e.url = u.String()
	}
	if p := env("PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: cordon sends traces over http/protobuf only", p)
	}
	e.headers = headers(env("HEADERS"))
	if v := env("TIMEOUT"); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: not a number of milliseconds", v)
		}
		if ms > 0 {
			e.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	switch c := env("COMPRESSION"); c {
	case "gzip":
		e.gzip = true
	case "", "none":
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION %q: gzip or none", c)
	}
	tc, err := tlsConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	e.client = &http.Client{Transport: tr, CheckRedirect: sameOrigin}
	return e, nil
}

// sameOrigin follows a collector's redirect only within its scheme, host
// and port: the headers (API keys, tokens) go with every request, and Go
// strips only its own credentials (Authorization, Cookie) on a redirect
// elsewhere, none on one from https to http. A redirect not followed
// answers the export (a refusal, not sent again).
func sameOrigin(req *http.Request, via []*http.Request) error {
	if first := via[0].URL; len(via) >= 10 || req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// endpoint parses a collector's URL.
// The error never repeats a password the URL holds.
func endpoint(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%s: not a URL", name)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: not an http or https URL", name, u.Redacted())
	}
	return u, nil
}

// headers parses "key=value,..." (values percent-encoded); malformed
// pairs are left out, as the specification's exporters do.
func headers(v string) map[string]string {
	h := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			continue
		}
		if dec, err := url.PathUnescape(val); err == nil {
			h[k] = strings.TrimSpace(dec)
		}
	}
	return h
}

// tlsConfig holds the certificates the environment names: the
// collector's authority, and a client certificate with its key.
func tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := env("CERTIFICATE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE %s: no PEM certificate in it", f)
		}
		c.RootCAs = pool
	}
	cert, key := env("CLIENT_CERTIFICATE"), env("CLIENT_KEY")
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// ExportSpans sends spans in one request, again after an answer that asks
// for it (429, 502, 503, 504, or no answer), within the timeout.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped || len(spans) == 0 {
		return nil
	}
	body := exportRequest(spans)
	if e.gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(body)
		w.Close()
		body = z.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		retry, after, err := e.send(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after <= 0 {
			after = wait
			wait = min(2*wait, 5*time.Second)
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("telemetry: %w (%v)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// send makes one attempt, and says whether another may succeed, after how
// long if the collector said.
func (e *exporter) send(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil && !permanent(err), 0, fmt.Errorf("sending traces: %w", err)
	}
	defer resp.Body.Close()
	// Read, bounded, so that the connection can be used again.
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("the collector answered %s", resp.Status)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = time.Duration(min(s, 60)) * time.Second
		}
		return true, after, err
	}
	return false, 0, err
}

// permanent reports an error that sending again cannot mend: the
// collector's certificate refused.
func permanent(err error) bool {
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &cert) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}

// Shutdown stops sending; the spans still queued were flushed by the
// provider before.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}
