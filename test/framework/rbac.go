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

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// BindRoles creates the ClusterRoles and Roles of a file of deploy/ (such as
// deploy/operator/rbac/role.yaml) and binds each to the ServiceAccount namespace/name, so that a
// component under test runs with exactly the permissions deploy/ grants it.
func BindRoles(ctx context.Context, k client.Client, path, namespace, name string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	err = EachYAMLDoc(data, func(doc []byte) error {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var objs []client.Object
		switch tm.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal(doc, role); err != nil {
				return err
			}
			objs = append(objs, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}})
		case "Role":
			role := &rbacv1.Role{}
			if err := yaml.Unmarshal(doc, role); err != nil {
				return err
			}
			objs = append(objs, role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: role.Name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}})
		}
		for _, o := range objs {
			if err := k.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
