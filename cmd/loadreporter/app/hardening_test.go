package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/hostcheck"
)

func TestHostCheckRefusesForeignNames(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := hostcheck.Guard("0.0.0.0:8080", []string{"reporter.internal", " Worker-7.example "}, "add it with --allowed-host", ok)
	for host, want := range map[string]int{
		"127.0.0.1:8080":           http.StatusNoContent,
		"[::1]:8080":               http.StatusNoContent,
		"10.0.0.7:8080":            http.StatusNoContent, // an IP cannot be rebound
		"localhost:8080":           http.StatusNoContent,
		"app.localhost":            http.StatusNoContent,
		"0.0.0.0:8080":             http.StatusNoContent,
		"reporter.internal:8080":   http.StatusNoContent,
		"WORKER-7.example.":        http.StatusNoContent,
		"evil.example:8080":        http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io:8080":    http.StatusMisdirectedRequest,
		"reporter.internal.evil.x": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodPost, "/loadreporter.v1.AdminService/SetTopology", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
		if want != http.StatusNoContent && !strings.Contains(rec.Body.String(), "--allowed-host") {
			t.Errorf("Host %q: %q does not say how to allow it", host, rec.Body.String())
		}
	}
}

// writePair writes a fresh self-signed key pair for name.
func writePair(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f+".tmp", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func servedName(t *testing.T, r *certReloader) string {
	t.Helper()
	c, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestCertificateReloadsWhenItsFilesChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "old.example")
	r, err := newCertReloader(certFile, keyFile, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, r); got != "old.example" {
		t.Fatalf("serving %s", got)
	}
	// A half-written rotation (a key that does not match) keeps the old pair.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, r); got != "old.example" {
		t.Fatalf("a broken pair on disk replaced the served one: %s", got)
	}
	writePair(t, dir, "new.example")
	if got := servedName(t, r); got != "new.example" {
		t.Fatalf("after rotation serving %s, want new.example", got)
	}
}
