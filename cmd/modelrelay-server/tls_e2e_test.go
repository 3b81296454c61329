package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"modelrelay/appproxy/appproxytest"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "modelrelay-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"*.models.test"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// TestE2ETLSListener: with tls_listen the listener speaks TLS only, circuits included.
func TestE2ETLSListener(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSigned(t)
	coord := appproxytest.NewCoordinator("tls-secret", "")
	coordSrv := httptest.NewServer(coord)
	defer coordSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := map[string]string{
		"LISTEN_ADDR": addr, "APPPROXY_ENABLED": "true", "APPPROXY_COORDINATOR_URL": coordSrv.URL,
		"APPPROXY_API_SECRET": "tls-secret", "APPPROXY_JWT_SECRET": "jwt", "APPPROXY_HOSTNAME": "127.0.0.1",
		"APPPROXY_WILDCARD_DOMAIN": ".models.test", "APPPROXY_EVENTS_ENABLED": "false", "APPPROXY_LIVE_MARKERS": "false",
		"APPPROXY_TLS_LISTEN": "true", "APPPROXY_TLS_CERT": certFile, "APPPROXY_TLS_KEY": keyFile,
	}
	cfg, _, err := LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("https://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready TLS listener: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// An unknown circuit host is refused over TLS exactly as over plain HTTP.
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/v1/models", nil)
	req.Host = "nope.models.test"
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("unknown subdomain over TLS: %d", resp.StatusCode)
	}
	// Plain HTTP is not served.
	plain := &http.Client{Timeout: 2 * time.Second}
	if resp, err := plain.Get("http://" + addr + "/livez"); err == nil {
		defer resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered on a TLS listener")
		}
	}
}
