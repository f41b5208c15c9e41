/*
Copyright The Convoy Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package progress

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Secret's get and update are granted for its name only, in deploy/operator/rbac/named_role.yaml
// (RBAC markers cannot name objects); its create comes with the per-job Secrets' in Reconcile's.

// certificateLifetime is how long a self-managed certificate is valid.
const certificateLifetime = 10 * 365 * 24 * time.Hour

// Certificate is the endpoint's serving key pair and the CA bundle pods verify it with.
type Certificate struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// TLSConfig serves the certificate.
func (c *Certificate) TLSConfig() (*tls.Config, error) {
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// LoadCertificate reads tls.crt, tls.key and ca.crt from dir, as cert-manager writes them; without
// ca.crt the certificate is its own CA.
func LoadCertificate(dir string) (*Certificate, error) {
	c := &Certificate{}
	var err error
	if c.CertPEM, err = os.ReadFile(filepath.Join(dir, "tls.crt")); err != nil {
		return nil, err
	}
	if c.KeyPEM, err = os.ReadFile(filepath.Join(dir, "tls.key")); err != nil {
		return nil, err
	}
	if c.CAPEM, err = os.ReadFile(filepath.Join(dir, "ca.crt")); os.IsNotExist(err) {
		c.CAPEM = c.CertPEM
	} else if err != nil {
		return nil, err
	}
	return c, nil
}

// EnsureCertificate returns the self-signed certificate for host kept in the Secret
// namespace/name, creating both on first use, so that every replica of the operator serves the
// same certificate and pods created by any of them trust it. A kept certificate that does not
// name host or expires within 30 days is replaced.
func EnsureCertificate(ctx context.Context, c client.Client, namespace, name, host string) (*Certificate, error) {
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
	switch {
	case err == nil:
		if cert, ok := usable(secret, host); ok {
			return cert, nil
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	cert, err := selfSigned(host)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM, "ca.crt": cert.CAPEM}
	if secret.UID == "" {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
		err = c.Create(ctx, secret)
	} else {
		secret.Data = data
		err = c.Update(ctx, secret)
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		// Another replica got there first: use its certificate.
		return EnsureCertificate(ctx, c, namespace, name, host)
	}
	if err != nil {
		return nil, fmt.Errorf("storing the progress certificate in Secret %s/%s: %w", namespace, name, err)
	}
	return cert, nil
}

func usable(secret *corev1.Secret, host string) (*Certificate, bool) {
	cert := &Certificate{CertPEM: secret.Data[corev1.TLSCertKey], KeyPEM: secret.Data[corev1.TLSPrivateKeyKey], CAPEM: secret.Data["ca.crt"]}
	block, _ := pem.Decode(cert.CertPEM)
	if block == nil || len(cert.KeyPEM) == 0 || len(cert.CAPEM) == 0 {
		return nil, false
	}
	x, err := x509.ParseCertificate(block.Bytes)
	if err != nil || x.VerifyHostname(host) != nil || time.Until(x.NotAfter) < 30*24*time.Hour {
		return nil, false
	}
	return cert, true
}

// selfSigned issues a certificate for host (and loopback) that is its own CA.
func selfSigned(host string) (*Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "convoy-operator progress"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certificateLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &Certificate{
		CertPEM: certPEM,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CAPEM:   bytes.Clone(certPEM),
	}, nil
}
