package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// Over TLS (the worker's --tls-cert/--tls-key), with the worker's
// certificate as the only root.
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 15*time.Second)
	certFile, keyFile, roots := selfSigned(t)
	m := startServer(t, func(c *app.Config) { c.Security.TLSCert, c.Security.TLSKey = certFile, keyFile })
	for _, p := range []Protocol{ProtocolGRPC, ProtocolConnect} {
		o := fastOptions(p)
		o.RouterID = "router-" + p.String()
		o.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		waitWorker(ctx, t, dialT(t, m.Addr(), o, deps{}), "fresh over TLS", isState(Fresh))
	}
	plain := dialT(t, m.Addr(), fastOptions(ProtocolGRPC), deps{})
	waitWorker(ctx, t, plain, "refused in plaintext", func(v *View) bool {
		return v.State == Disconnected && v.Reason != "connecting"
	})
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// them with a pool holding the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, roots
}
