package progress

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

// The user-info extras a pod-bound ServiceAccount token carries.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// maxBody bounds a report's size.
const maxBody = 64 << 10

// writeTimeout bounds one coalesced status write, retries included.
const writeTimeout = 30 * time.Second

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=convoy.dev,resources=trainingjobs/status,verbs=get;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Server serves the progress and checkpoint endpoints on every operator replica; each report is
// persisted in the job's status before the call returns. It is a manager Runnable.
type Server struct {
	// Listener is where it serves; Start closes it.
	Listener net.Listener
	// TLS is the serving configuration.
	TLS *tls.Config
	// Client reads jobs and pods from the manager's cache, reviews tokens and writes status.
	Client client.Client
	// APIReader reads a job past the cache after a write conflict.
	APIReader client.Reader
	Clock     clock.PassiveClock

	mu      sync.Mutex
	pending map[types.NamespacedName]*batch

	tokensOnce sync.Once
	tokens     authenticator.Token
}

// tokenCacheTTL is how long a token the API server accepted is trusted without another
// TokenReview, as the API server's own webhook token cache does (there, 2 minutes): a worker
// reporting every few seconds costs one review a minute, not one a report. Rejections and failed
// reviews are not cached. Whether the token's pod still exists and belongs to the job is checked
// on every report.
const tokenCacheTTL = time.Minute

// batch is the updates of one job waiting for, or in, a status write.
type batch struct {
	updates []*update
	writing bool
}

type update struct {
	report     *Report
	checkpoint *Checkpoint
	done       chan error
}

// errFinished refuses reports for a job that has completed or failed.
var errFinished = errors.New("finished")

// NeedLeaderElection is false: every replica serves reports.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	srv := &http.Server{Handler: s.Handler(), TLSConfig: s.TLS, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(s.Listener, "", "") }()
	ctrl.LoggerFrom(ctx).Info("Serving progress reports", "address", s.Listener.Addr().String())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// Handler routes POST /v1/namespaces/{namespace}/trainingjobs/{name}/{progress,checkpoint}.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/namespaces/{namespace}/trainingjobs/{name}/progress", func(w http.ResponseWriter, req *http.Request) {
		r := &Report{}
		s.handle(w, req, r, r.Validate, &update{report: r})
	})
	mux.HandleFunc("POST /v1/namespaces/{namespace}/trainingjobs/{name}/checkpoint", func(w http.ResponseWriter, req *http.Request) {
		c := &Checkpoint{}
		s.handle(w, req, c, c.Validate, &update{checkpoint: c})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (s *Server) handle(w http.ResponseWriter, req *http.Request, body any, validate func() error, u *update) {
	ctx := req.Context()
	key := types.NamespacedName{Namespace: req.PathValue("namespace"), Name: req.PathValue("name")}
	log := ctrl.Log.WithName("progress").WithValues("trainingJob", key.String())
	if code, err := s.authorize(ctx, req, key); err != nil {
		log.V(2).Info("Refused a report", "status", code, "reason", err.Error())
		http.Error(w, err.Error(), code)
		return
	}
	dec := json.NewDecoder(io.LimitReader(req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(body); err != nil {
		http.Error(w, "the body is not a report: "+err.Error()+"; see the protocol in the operator's README", http.StatusBadRequest)
		return
	}
	if err := validate(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	err := s.submit(ctx, key, u)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, errFinished):
		http.Error(w, fmt.Sprintf("TrainingJob %s has finished; reports are no longer recorded", key), http.StatusConflict)
	case apierrors.IsNotFound(err):
		http.Error(w, fmt.Sprintf("TrainingJob %s does not exist", key), http.StatusNotFound)
	default:
		log.Error(err, "Recording a report")
		http.Error(w, "recording the report failed: "+err.Error()+"; retry later", http.StatusServiceUnavailable)
	}
}

// authorize accepts the request when its bearer token is a ServiceAccount token for Audience,
// bound to a pod that still exists and belongs to the job key.
func (s *Server) authorize(ctx context.Context, req *http.Request, key types.NamespacedName) (int, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, errors.New("no bearer token: send the token in $CONVOY_PROGRESS_TOKEN_FILE as 'Authorization: Bearer <token>'")
	}
	s.tokensOnce.Do(func() { s.tokens = tokencache.New(&tokenReviewer{client: s.Client}, false, tokenCacheTTL, 0) })
	resp, ok, err := s.tokens.AuthenticateToken(authenticator.WithAudiences(ctx, authenticator.Audiences{Audience}), token)
	var rejected rejectedToken
	switch {
	case errors.As(err, &rejected):
		return http.StatusUnauthorized, fmt.Errorf("the token was not accepted for audience %s: %s", Audience, rejected.reason)
	case err != nil:
		return http.StatusServiceUnavailable, fmt.Errorf("reviewing the token failed: %v; retry later", err)
	case !ok:
		return http.StatusUnauthorized, fmt.Errorf("the token was not accepted for audience %s", Audience)
	}
	who := resp.User
	podName, podUID := first(who.GetExtra()[extraPodName]), first(who.GetExtra()[extraPodUID])
	if podName == "" || !strings.HasPrefix(who.GetName(), "system:serviceaccount:"+key.Namespace+":") {
		return http.StatusForbidden, fmt.Errorf("the token of %s is not bound to a pod of namespace %s: use the projected token in $CONVOY_PROGRESS_TOKEN_FILE", who.GetName(), key.Namespace)
	}
	pod := &corev1.Pod{}
	err = s.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: podName}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return http.StatusServiceUnavailable, err
	}
	if err != nil || string(pod.UID) != podUID || pod.Labels[convoy.LabelJobName] != key.Name {
		return http.StatusForbidden, fmt.Errorf("pod %s/%s is not a pod of TrainingJob %s: a job's reports are accepted from its own pods only", key.Namespace, podName, key)
	}
	return 0, nil
}

// tokenReviewer asks the API server to review a token for the audiences in the context.
type tokenReviewer struct {
	client client.Client
}

// rejectedToken is a token the API server did not accept, and why.
type rejectedToken struct{ reason string }

func (r rejectedToken) Error() string { return r.reason }

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, _ := authenticator.AudiencesFrom(ctx)
	tr := &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: auds}}
	if err := t.client.Create(ctx, tr); err != nil {
		return nil, false, err
	}
	if !tr.Status.Authenticated {
		return nil, false, rejectedToken{reason: tr.Status.Error}
	}
	u := tr.Status.User
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	return &authenticator.Response{Audiences: tr.Status.Audiences,
		User: &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}}, true, nil
}

func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// submit queues u for the job's next status write and waits for it. Reports that arrive while a
// write is in flight are folded into the one after it, so a burst of reports costs two writes.
func (s *Server) submit(ctx context.Context, key types.NamespacedName, u *update) error {
	u.done = make(chan error, 1)
	s.mu.Lock()
	if s.pending == nil {
		s.pending = map[types.NamespacedName]*batch{}
	}
	b := s.pending[key]
	if b == nil {
		b = &batch{}
		s.pending[key] = b
	}
	b.updates = append(b.updates, u)
	if !b.writing {
		b.writing = true
		go s.flush(key, b)
	}
	s.mu.Unlock()
	select {
	case err := <-u.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) flush(key types.NamespacedName, b *batch) {
	for {
		s.mu.Lock()
		updates := b.updates
		b.updates = nil
		if len(updates) == 0 {
			b.writing = false
			delete(s.pending, key)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := s.write(ctx, key, updates)
		cancel()
		for _, u := range updates {
			u.done <- err
		}
	}
}

// write applies updates to the job's status, reading the job again past the cache on a conflict.
func (s *Server) write(ctx context.Context, key types.NamespacedName, updates []*update) error {
	var reader client.Reader = s.Client
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &convoy.TrainingJob{}
		if err := reader.Get(ctx, key, job); err != nil {
			return err
		}
		reader = s.APIReader
		if job.Status.IsFinished() {
			return errFinished
		}
		st := job.Status.DeepCopy()
		for _, u := range updates {
			if u.report != nil {
				ApplyReport(job, st, u.report)
			}
			if u.checkpoint != nil {
				ApplyCheckpoint(st, u.checkpoint, s.Clock.Now())
			}
		}
		if equality.Semantic.DeepEqual(*st, job.Status) {
			return nil
		}
		job.Status = *st
		return s.Client.Status().Update(ctx, job)
	})
}
