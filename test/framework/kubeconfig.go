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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// contextName names the single cluster, user and context in the kubeconfigs the framework writes.
const contextName = "convoy-local"

// ServiceAccountTokenExpiration is how long the tokens ServiceAccountConfig and
// ServiceAccountKubeconfig mint stay valid.
const ServiceAccountTokenExpiration = 24 * time.Hour

// ServiceAccountConfig mints a token for the existing ServiceAccount namespace/name through the
// TokenRequest API and returns a configuration that authenticates with it, so the caller acts with
// exactly the RBAC permissions bound to that ServiceAccount.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ServiceAccountTokenExpiration / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            c.RESTConfig.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		BearerToken:     tr.Status.Token,
		QPS:             c.RESTConfig.QPS,
		Burst:           c.RESTConfig.Burst,
	}, nil
}

// ServiceAccountKubeconfig is ServiceAccountConfig written as a kubeconfig file, for components
// run with StartProcess. It returns the file's path, <StateDir>/kubeconfigs/<namespace>-<name>.kubeconfig.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	cfg, err := c.ServiceAccountConfig(ctx, namespace, name)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.StateDir, "kubeconfigs", namespace+"-"+name+".kubeconfig")
	return path, writeKubeconfig(path, cfg.Host, c.pki.caPEM, &clientcmdapi.AuthInfo{Token: cfg.BearerToken})
}

func writeCertKubeconfig(path, server string, caPEM []byte, kp *keyPair) error {
	return writeKubeconfig(path, server, caPEM, &clientcmdapi.AuthInfo{
		ClientCertificateData: kp.certPEM,
		ClientKeyData:         kp.keyPEM,
	})
}

// writeKubeconfig writes a self-contained kubeconfig: certificates and keys are embedded, so the
// file stays usable when copied elsewhere.
func writeKubeconfig(path, server string, caPEM []byte, user *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[contextName] = user
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// clientcmd.WriteToFile replaces the file in place; write and rename so that a reader polling
	// for the file never sees half of it.
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
