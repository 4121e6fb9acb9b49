package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, into dir.
type testPKI struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	client                    tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(name string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvDER, srvKey := issue("server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	cliDER, cliKey := issue("router", x509.ExtKeyUsageClientAuth, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		caFile: write("ca.pem", "CERTIFICATE", caDER), certFile: write("server.pem", "CERTIFICATE", srvDER),
		keyFile: write("server-key.pem", "EC PRIVATE KEY", keyDER), pool: pool,
		client: tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey},
	}
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) (router, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	st, err := cc.NewStream(testCtx(t, 10*time.Second), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		return nil, err
	}
	return grpcRouter{st}, nil
}

func mustDialTLS(t *testing.T, addr string, cfg *tls.Config) router {
	t.Helper()
	r, err := dialTLS(t, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTLSAndMutualTLS: --tls-cert/--tls-key serve Monitor over TLS;
// --tls-client-ca turns away routers without a client certificate.
func TestTLSAndMutualTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	t.Run("tls", func(t *testing.T) {
		c := testConfig()
		c.Security.TLSCert, c.Security.TLSKey = pki.certFile, pki.keyFile
		m := startMain(t, c, nil)
		r := mustDialTLS(t, m.Addr(), &tls.Config{RootCAs: pki.pool})
		_ = r.Send(registerFrame("tls-router", 100, 5000))
		if recvFrame(t, r).GetRegistered() == nil || recvReport(t, r) == nil {
			t.Fatal("no ack or report over TLS")
		}
		_ = r.Send(stopFrame)
		expectCleanEnd(t, r)
	})
	t.Run("mutual tls", func(t *testing.T) {
		c := testConfig()
		c.Security.TLSCert, c.Security.TLSKey, c.Security.TLSClientCA = pki.certFile, pki.keyFile, pki.caFile
		m := startMain(t, c, nil)
		anonymous, err := dialTLS(t, m.Addr(), &tls.Config{RootCAs: pki.pool})
		if err == nil {
			_ = anonymous.Send(registerFrame("anonymous", 100, 5000))
			if _, err := anonymous.Recv(); err == nil {
				t.Fatal("a router without a client certificate was served")
			}
		}
		r := mustDialTLS(t, m.Addr(), &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}})
		_ = r.Send(registerFrame("mtls-router", 100, 5000))
		if recvFrame(t, r).GetRegistered() == nil {
			t.Fatal("no ack with a client certificate")
		}
		_ = r.Send(stopFrame)
		expectCleanEnd(t, r)
	})
}
