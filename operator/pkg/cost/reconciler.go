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

package cost

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// DefaultPriceList is the price list ConfigMap's name in the operator's namespace.
const DefaultPriceList = "convoy-prices"

// Event reasons on the price list ConfigMap.
const (
	// ReasonInvalidPriceList: some keys cannot be used; the message names each and its fix.
	ReasonInvalidPriceList = "InvalidPriceList"
	// ReasonPriceListLoaded: every key is in use.
	ReasonPriceListLoaded = "PriceListLoaded"

	// actionLoad is the events' action: reading the price list.
	actionLoad = "LoadPriceList"
)

// Book reads the price list ConfigMap from a cache of its own (the operator's main cache holds
// only the jobs' ConfigMaps), parsed once per version.
type Book struct {
	key    types.NamespacedName
	reader client.Reader

	mu      sync.Mutex
	version string
	prices  Prices
	errs    []KeyError
}

// NewBook returns a Book of the ConfigMap key, with a cache of that one ConfigMap added to mgr.
func NewBook(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, key types.NamespacedName) (*Book, cache.Cache, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {
			Namespaces: map[string]cache.Config{key.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", key.Name),
		}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("price list cache: %w", err)
	}
	// The informer exists before the manager starts, so that the manager waits for it to sync.
	if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, nil, fmt.Errorf("price list cache: %w", err)
	}
	if err := mgr.Add(managerCache{c}); err != nil {
		return nil, nil, err
	}
	return &Book{key: key, reader: c}, c, nil
}

// managerCache makes the manager run a cache as one of its caches, as it runs its own: synced
// before any controller starts and stopped once every controller has. Added bare, a cache is a
// runnable that needs no leader election: controllers could read it before it synced and wait
// for it, and the manager stops it before them.
type managerCache struct{ cache.Cache }

// GetCache is what the manager knows a cache by.
func (c managerCache) GetCache() cache.Cache { return c.Cache }

// Source names the ConfigMap for messages.
func (b *Book) Source() string { return "ConfigMap " + b.key.String() }

// Prices returns the price list in force and the keys left out of it.
func (b *Book) Prices(ctx context.Context) (Prices, []KeyError, error) {
	cm := &corev1.ConfigMap{}
	err := b.reader.Get(ctx, b.key, cm)
	if apierrors.IsNotFound(err) {
		return Prices{Source: b.Source(), Problem: b.Source() + " does not exist"}, nil, nil
	}
	if err != nil {
		return Prices{}, nil, fmt.Errorf("reading the price list %s: %w", b.Source(), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cm.ResourceVersion != b.version || b.version == "" {
		list, errs := Parse(cm.Data)
		b.prices, b.errs, b.version = Prices{List: list, Source: b.Source(), Problem: describe(b.Source(), errs)}, errs, cm.ResourceVersion
		if list.Currency == "" {
			b.prices.List = nil
		}
	}
	return b.prices, b.errs, nil
}

func describe(source string, errs []KeyError) string {
	if len(errs) == 0 {
		return ""
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return source + " has keys that are not used: " + strings.Join(parts, "; ")
}

// PriceListReconciler reports on the price list ConfigMap, as Events on it, whether its keys
// are in use or which are not and why: a wrong price shows where the administrator edits it.
type PriceListReconciler struct {
	Book     *Book
	Recorder events.EventRecorder
}

// SetupWithManager watches the price list through the Book's cache.
func (r *PriceListReconciler) SetupWithManager(mgr ctrl.Manager, c cache.Cache) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("pricelist").
		WatchesRawSource(source.Kind(c, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})).
		Complete(r)
}

// Reconcile emits one Event per version of the price list.
func (r *PriceListReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	prices, errs, err := r.Book.Prices(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	cm := &corev1.ConfigMap{}
	if err := r.Book.reader.Get(ctx, r.Book.key, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(errs) > 0 {
		ctrl.LoggerFrom(ctx).Info("Price list has keys that are not used", "configMap", r.Book.key, "problem", prices.Problem)
		r.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonInvalidPriceList, actionLoad, "%s: usage those keys would price stays unpriced", prices.Problem)
		return ctrl.Result{}, nil
	}
	if prices.List == nil {
		r.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonInvalidPriceList, actionLoad, "%s has no prices: add currency and gpu.<product>[.spot|.on-demand] keys (docs/operations.md)", prices.Source)
		return ctrl.Result{}, nil
	}
	r.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, ReasonPriceListLoaded, actionLoad, "prices in %s are in use", prices.List.Currency)
	return ctrl.Result{}, nil
}
