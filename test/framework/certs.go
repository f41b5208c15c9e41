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

package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is a certificate authority and the key pairs it issues, as PEM files in dir.
type pki struct {
	dir    string
	caName string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

// keyPair is an issued certificate and its key, in PEM and on disk.
type keyPair struct {
	certPEM, keyPEM   []byte
	certFile, keyFile string
}

// newPKI creates a certificate authority, stored as <dir>/<caName>.crt and .key.
func newPKI(dir, caName string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "convoy-local-" + caName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, cert, err := sign(tmpl, key.Public(), nil, key)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caName: caName, caCert: cert, caKey: key, caPEM: pemBlock("CERTIFICATE", der)}
	if _, err := p.write(caName, der, key); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) caFile() string    { return filepath.Join(p.dir, p.caName+".crt") }
func (p *pki) caKeyFile() string { return filepath.Join(p.dir, p.caName+".key") }

// serving issues a server certificate for the loopback names Kubernetes components are reached by.
func (p *pki) serving(name string) (*keyPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		// 10.0.0.1 is the kubernetes Service's address in serviceClusterIPRange.
		// NodeGatewayIP is where real nodes reach the API server.
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1), net.ParseIP(NodeGatewayIP)},
	})
}

// client issues a client certificate; Kubernetes reads the user from CN and the groups from O.
func (p *pki) client(name, user string, groups ...string) (*keyPair, error) {
	return p.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *pki) issue(name string, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, _, err := sign(tmpl, key.Public(), p.caCert, p.caKey)
	if err != nil {
		return nil, fmt.Errorf("issuing %s certificate: %w", name, err)
	}
	return p.write(name, der, key)
}

// serviceAccountKey writes the key pair that signs and verifies ServiceAccount tokens.
func (p *pki) serviceAccountKey() (privateFile, publicFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	kp, err := p.write("sa", nil, key)
	if err != nil {
		return "", "", err
	}
	publicFile = filepath.Join(p.dir, "sa.pub")
	return kp.keyFile, publicFile, os.WriteFile(publicFile, pemBlock("PUBLIC KEY", pub), 0o644)
}

// write stores the key as name.key and, when der is set, the certificate as name.crt.
func (p *pki) write(name string, der []byte, key crypto.Signer) (*keyPair, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	kp := &keyPair{
		keyPEM:   pemBlock("PRIVATE KEY", keyDER),
		keyFile:  filepath.Join(p.dir, name+".key"),
		certFile: filepath.Join(p.dir, name+".crt"),
	}
	if err := os.WriteFile(kp.keyFile, kp.keyPEM, 0o600); err != nil {
		return nil, err
	}
	if der != nil {
		kp.certPEM = pemBlock("CERTIFICATE", der)
		if err := os.WriteFile(kp.certFile, kp.certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return kp, nil
}

// sign completes tmpl with a serial number and a validity window and signs it with signer, or
// self-signs it when parent is nil.
func sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, signer crypto.Signer) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	// Backdated so that a clock step does not make a fresh cluster's certificates "not yet valid".
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
