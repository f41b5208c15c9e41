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
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates or updates every CustomResourceDefinition in the YAML files (*.yaml, *.yml,
// multi-document allowed; other kinds are ignored) under dirs, searched recursively, and waits
// until each is Established and its served versions answer lists (before the watch cache is
// ready they answer "429 Too Many Requests", which client-go waits out for a second). The first
// create of a custom resource less than 2 s after its CRD became Established still takes 2 s: the
// API server delays it on purpose, for HA setups.
func (c *Cluster) InstallCRDs(ctx context.Context, dirs ...string) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range dirs {
		found, err := readCRDs(dir)
		if err != nil {
			return err
		}
		crds = append(crds, found...)
	}
	for _, crd := range crds {
		if err := c.apply(ctx, crd); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	transport, err := rest.TransportFor(c.RESTConfig)
	if err != nil {
		return err
	}
	httpClient := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	for _, crd := range crds {
		if err := c.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				if err := c.waitServed(ctx, httpClient, fmt.Sprintf("/apis/%s/%s/%s", crd.Spec.Group, v.Name, crd.Spec.Names.Plural)); err != nil {
					return fmt.Errorf("waiting for CRD %s to serve %s: %w", crd.Name, v.Name, err)
				}
			}
		}
	}
	return nil
}

// waitServed polls a list of the resource at path with a plain HTTP client, which, unlike
// client-go, does not wait out a 429 for a second before it asks again.
func (c *Cluster) waitServed(ctx context.Context, httpClient *http.Client, path string) error {
	return c.poll(ctx, APIServer, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.RESTConfig.Host+path+"?limit=1", nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// apply creates crd, or replaces the spec of the one already installed.
func (c *Cluster) apply(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	err := c.Client.Create(ctx, crd.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(crd), current); err != nil {
		return err
	}
	current.Spec = crd.Spec
	current.Labels = crd.Labels
	current.Annotations = crd.Annotations
	return c.Client.Update(ctx, current)
}

func (c *Cluster) waitEstablished(ctx context.Context, name string) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.poll(ctx, APIServer, func() (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be Established (conditions %+v): %w", name, crd.Status.Conditions, err)
	}
	return nil
}

// readCRDs decodes the CustomResourceDefinitions in the YAML files under dir.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		err = EachYAMLDoc(data, func(doc []byte) error {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return err
			}
			if tm.Kind != "CustomResourceDefinition" || tm.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
				return nil
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return err
			}
			crds = append(crds, crd)
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading CRDs from %s: %w", dir, err)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition found in %s", dir)
	}
	return crds, nil
}
