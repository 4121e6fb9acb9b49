package app

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certReloader serves the key pair in certFile and keyFile and loads it
// anew when either file changes (a renewed certificate, a rotated secret),
// so new handshakes use the new pair without a restart. It looks at the
// files at most once per interval; a pair that fails to load is logged and
// the previous one kept.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	stamp    string // of the pair in use
	badStamp string // of files that did not load, warned about once
	checked  time.Time
}

func newCertReloader(certFile, keyFile string, every time.Duration, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: every, log: log}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	return r, nil
}

// fileStamp changes whenever either file's size or modification time does.
func (r *certReloader) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.every {
		r.checked = now
		r.reloadLocked()
	}
	return r.cert, nil
}

func (r *certReloader) reloadLocked() {
	stamp, err := r.fileStamp()
	if err != nil || stamp == r.stamp || stamp == r.badStamp {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Files are often replaced one at a time: the next change to
		// either is tried again.
		r.badStamp = stamp
		r.log.Warn("TLS certificate changed on disk but does not load; keeping the previous one",
			"cert", r.certFile, "key", r.keyFile, "err", err)
		return
	}
	r.cert, r.stamp = &cert, stamp
	r.log.Info("TLS certificate reloaded", "cert", r.certFile)
}
