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
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
	"github.com/convoy-dev/convoy/operator/pkg/forecast"
	"github.com/convoy-dev/convoy/operator/pkg/mlframework"
)

// The user-info extras a pod-bound ServiceAccount token carries.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// maxBody bounds a report's size.
const maxBody = 64 << 10

// Limits of the HTTP server: a client that sends its request slowly, or keeps connections open
// without sending, is cut off.
const (
	readTimeout    = 30 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 16 << 10
)

// Each client address (a pod's IP) may send clientRate requests a second, in bursts of clientBurst,
// before its token is reviewed: a flood of requests costs the API server no more than that in
// TokenReviews. A trainer reports every few seconds at most.
const (
	clientRate  = 10
	clientBurst = 50
)

// rejectedTokenTTL is how long a token the API server refused is refused again without asking.
const rejectedTokenTTL = time.Minute

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
	// CheckpointURI returns where a job's pods write checkpoints (empty when its spec names no
	// storage): a reported checkpoint must lie under it.
	CheckpointURI func(*convoy.TrainingJob) string
	// AttemptCheckpointURI returns where the pods of the job's current attempt write checkpoints.
	AttemptCheckpointURI func(*convoy.TrainingJob) string
	// S3Presign, when set, signs URLs for the pods of jobs with spec.checkpoint.storage.s3Access
	// presigned (POST .../presign), with the operator's own S3 credentials.
	S3Presign *aws.Config
	// AzurePresign, when set, is the storage account whose key signs SAS for the pods of jobs with
	// spec.checkpoint.storage.azureAccess presigned.
	AzurePresign *AzureAccount
	// GCSPresign, when set, is the service account whose key signs GCS URLs for the pods of jobs
	// with spec.checkpoint.storage.gcsAccess presigned.
	GCSPresign *GCSAccount
	// Recorder, when set, records an Event on the job when its tracker run is first recorded.
	Recorder events.EventRecorder

	mu      sync.Mutex
	pending map[types.NamespacedName]*batch

	setupOnce sync.Once
	tokens    authenticator.Token
	presigner *s3.PresignClient
	clients   *clientLimits
	reviews   *reviewLimits
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
	tracking   *Tracking
	// attempt is the reporting pod's attempt (its convoy.dev/restart-attempt label).
	attempt int32
	done    chan error
}

// errFinished refuses reports for a job that has completed or failed.
var errFinished = errors.New("finished")

// refusal is a report the job's state refuses, with the HTTP status to answer.
type refusal struct {
	code   int
	reason string
}

func (r refusal) Error() string { return r.reason }

// NeedLeaderElection is false: every replica serves reports.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	s.setup()
	srv := &http.Server{Handler: s.Handler(), TLSConfig: s.TLS, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: readTimeout, WriteTimeout: readTimeout + writeTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: maxHeaderBytes}
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
	mux.HandleFunc("POST /v1/namespaces/{namespace}/trainingjobs/{name}/tracking", func(w http.ResponseWriter, req *http.Request) {
		t := &Tracking{}
		s.handle(w, req, t, t.Validate, &update{tracking: t})
	})
	mux.HandleFunc("POST /v1/namespaces/{namespace}/trainingjobs/{name}/presign", s.presign)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (s *Server) setup() {
	s.setupOnce.Do(func() {
		if s.Clock == nil {
			s.Clock = clock.RealClock{}
		}
		// Refusals are cached too (for rejectedTokenTTL): the same bad token sent again costs no review.
		// A review the budgets have no room for is an error, not cached.
		s.reviews = newReviewLimits(s.Clock)
		s.tokens = tokencache.New(&tokenReviewer{client: s.Client, limits: s.reviews}, false, tokenCacheTTL, rejectedTokenTTL)
		s.clients = newClientLimits(s.Clock)
		if s.S3Presign != nil {
			// S3-compatible servers on a plain host name or address have no bucket sub-domains.
			s.presigner = s3.NewPresignClient(s3.NewFromConfig(*s.S3Presign, func(o *s3.Options) { o.UsePathStyle = s.S3Presign.BaseEndpoint != nil }))
		}
	})
}

func (s *Server) handle(w http.ResponseWriter, req *http.Request, body any, validate func() error, u *update) {
	s.setup()
	ctx := req.Context()
	key := types.NamespacedName{Namespace: req.PathValue("namespace"), Name: req.PathValue("name")}
	log := ctrl.Log.WithName("progress").WithValues("trainingJob", key.String())
	if !s.clients.allow(req.RemoteAddr) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("more than %d requests a second from %s; retry later", clientRate, req.RemoteAddr), http.StatusTooManyRequests)
		return
	}
	job, pod, code, err := s.authorize(ctx, req, key)
	if err != nil {
		log.V(2).Info("Refused a report", "status", code, "reason", err.Error())
		if busy := (reviewBusy{}); errors.As(err, &busy) {
			w.Header().Set("Retry-After", busy.retryAfterSeconds())
		}
		http.Error(w, err.Error(), code)
		return
	}
	dec := json.NewDecoder(io.LimitReader(req.Body, maxBody))
	dec.DisallowUnknownFields()
	err = dec.Decode(body)
	if _, next := dec.Token(); err == nil && next != io.EOF {
		// One report a request: what follows it would be lost.
		err = errors.New("more follows the JSON object")
	}
	if err != nil {
		http.Error(w, "the body is not a report: "+err.Error()+"; see the protocol in the operator's README", http.StatusBadRequest)
		return
	}
	if err := validate(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.withinSpec(job, u); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if u.tracking != nil && (pod.Labels[convoy.LabelReplicaRole] != string(mlframework.Master.Role) || pod.Labels[convoy.LabelReplicaRank] != strconv.Itoa(int(mlframework.Master.Rank))) {
		http.Error(w, fmt.Sprintf("pod %s is not rank 0 of the job's workers: only rank 0 reports the job's tracker run", pod.Name), http.StatusForbidden)
		return
	}
	attempt, _ := strconv.ParseInt(pod.Labels[convoy.LabelRestartAttempt], 10, 32)
	u.attempt = int32(attempt)
	err = s.submit(ctx, key, u)
	var refused refusal
	switch {
	case err == nil:
		if deadline, asked := job.CheckpointDeadline(); asked && u.report != nil {
			// A checkpoint report answers the request; a progress report is told of it.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(Reply{CheckpointRequested: true, Deadline: deadline.UTC()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &refused):
		log.V(2).Info("Refused a report", "pod", pod.Name, "status", refused.code, "reason", refused.reason)
		http.Error(w, refused.reason, refused.code)
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
// bound to a pod that still exists and that the job controls (its controller owner reference has
// the job's UID): a pod that only carries the job's labels is refused. It returns the job and the pod.
// A token whose unverified claims cannot pass these checks is refused before any TokenReview.
func (s *Server) authorize(ctx context.Context, req *http.Request, key types.NamespacedName) (*convoy.TrainingJob, *corev1.Pod, int, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, nil, http.StatusUnauthorized, errors.New("no bearer token: send the token in $CONVOY_PROGRESS_TOKEN_FILE as 'Authorization: Bearer <token>'")
	}
	claims, err := unverifiedClaims(token)
	if err != nil {
		return nil, nil, http.StatusUnauthorized, err
	}
	if claims.Namespace != key.Namespace {
		return nil, nil, http.StatusForbidden, fmt.Errorf("the token is for namespace %s, not the job's namespace %s: use the projected token in $CONVOY_PROGRESS_TOKEN_FILE", claims.Namespace, key.Namespace)
	}
	job, pod, code, err := s.podOfJob(ctx, key, claims)
	if err != nil {
		return nil, nil, code, err
	}
	resp, ok, err := s.tokens.AuthenticateToken(authenticator.WithAudiences(ctx, authenticator.Audiences{Audience}), token)
	var busy reviewBusy
	switch {
	case errors.As(err, &busy):
		return nil, nil, busy.code, busy
	case err != nil:
		return nil, nil, http.StatusServiceUnavailable, fmt.Errorf("reviewing the token failed: %v; retry later", err)
	case !ok:
		return nil, nil, http.StatusUnauthorized, fmt.Errorf("the token was not accepted for audience %s: send the projected token in $CONVOY_PROGRESS_TOKEN_FILE", Audience)
	}
	// The reviewed user must be the pod the claims named, which podOfJob checked.
	who := resp.User
	podName, podUID := first(who.GetExtra()[extraPodName]), first(who.GetExtra()[extraPodUID])
	if podName != claims.Pod || podUID != claims.PodUID || !strings.HasPrefix(who.GetName(), "system:serviceaccount:"+key.Namespace+":") {
		return nil, nil, http.StatusForbidden, fmt.Errorf("the token of %s is not bound to pod %s/%s: use the projected token in $CONVOY_PROGRESS_TOKEN_FILE", who.GetName(), key.Namespace, claims.Pod)
	}
	return job, pod, 0, nil
}

// podOfJob returns the job and the pod the claims name when the job controls that pod. A missing
// job is refused as a pod not of the job is, so that no request learns which jobs exist before
// its token is reviewed.
func (s *Server) podOfJob(ctx context.Context, key types.NamespacedName, claims podClaims) (*convoy.TrainingJob, *corev1.Pod, int, error) {
	job := &convoy.TrainingJob{}
	jobErr := s.Client.Get(ctx, key, job)
	if jobErr != nil && !apierrors.IsNotFound(jobErr) {
		return nil, nil, http.StatusServiceUnavailable, jobErr
	}
	pod := &corev1.Pod{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: claims.Pod}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, http.StatusServiceUnavailable, err
	}
	owner := metav1.GetControllerOf(pod)
	if jobErr != nil || err != nil || string(pod.UID) != claims.PodUID || owner == nil || owner.UID != job.UID {
		return nil, nil, http.StatusForbidden, fmt.Errorf("pod %s/%s is not a pod of TrainingJob %s: a job's reports are accepted from the pods it controls only", key.Namespace, claims.Pod, key)
	}
	return job, pod, 0, nil
}

// withinSpec refuses a report the job's spec rules out: an epoch past hyperparameters.epochs, an
// accuracy outside [0, 1], a checkpoint outside the job's checkpoint location or past its epochs.
func (s *Server) withinSpec(job *convoy.TrainingJob, u *update) error {
	if r := u.report; r != nil {
		if hp := job.Spec.Hyperparameters; r.Epoch != nil && r.TotalEpochs == nil && hp != nil && hp.Epochs != nil && *r.Epoch > *hp.Epochs {
			return fmt.Errorf("epoch %d is past spec.hyperparameters.epochs (%d): report totalEpochs if the run has more", *r.Epoch, *hp.Epochs)
		}
		if r.Epoch != nil && r.TotalEpochs != nil && *r.Epoch > *r.TotalEpochs {
			return fmt.Errorf("epoch %d is past totalEpochs %d", *r.Epoch, *r.TotalEpochs)
		}
	}
	if c := u.checkpoint; c != nil {
		// The job's epochs: the latest totalEpochs reported, else the spec's.
		total := job.Status.TotalEpochs
		if hp := job.Spec.Hyperparameters; total == 0 && hp != nil && hp.Epochs != nil {
			total = *hp.Epochs
		}
		if total > 0 && c.Epoch > total {
			return fmt.Errorf("checkpoint epoch %d is past the job's %d epochs (status.totalEpochs, else spec.hyperparameters.epochs)", c.Epoch, total)
		}
	}
	if c := u.checkpoint; c != nil && s.CheckpointURI != nil {
		if loc := s.CheckpointURI(job); loc != "" && !Under(c.Path, loc) {
			return fmt.Errorf("checkpoint path %q is not under the job's checkpoint location %s ($CONVOY_CHECKPOINT_ROOT)", c.Path, loc)
		}
	}
	return nil
}

// Under reports whether p is dir or a path below it, with no "." or ".." segment.
func Under(p, dir string) bool {
	rest, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/"))
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// tokenReviewer asks the API server to review a token for the audiences in the context, within
// the review budgets of the token's namespace and of the operator, and within reviewTimeout.
type tokenReviewer struct {
	client client.Client
	limits *reviewLimits
}

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	// authorize read the claims before: they name the namespace of the job the request is about.
	claims, err := unverifiedClaims(token)
	if err != nil {
		return nil, false, nil
	}
	release, err := t.limits.acquire(claims.Namespace)
	if err != nil {
		return nil, false, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	auds, _ := authenticator.AudiencesFrom(ctx)
	tr := &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: auds}}
	if err := t.client.Create(ctx, tr); err != nil {
		return nil, false, err
	}
	if !tr.Status.Authenticated {
		return nil, false, nil
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
		_ = s.write(ctx, key, updates)
		cancel()
	}
}

// write applies updates to the job's status, reading the job again past the cache on a conflict.
// An update from another attempt than the job's current one, or a checkpoint older than the
// attempt's latest, is refused on its own; the others are written.
func (s *Server) write(ctx context.Context, key types.NamespacedName, updates []*update) error {
	var reader client.Reader = s.Client
	refused := make([]error, len(updates))
	var tracked *convoy.TrackingStatus
	var written *convoy.TrainingJob
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &convoy.TrainingJob{}
		if err := reader.Get(ctx, key, job); err != nil {
			return err
		}
		reader = s.APIReader
		if job.Status.IsFinished() {
			return errFinished
		}
		st := job.Status.DeepCopy()
		tracked = nil
		for i, u := range updates {
			refused[i] = refuse(st, u)
			if refused[i] != nil {
				continue
			}
			if u.tracking != nil && ApplyTracking(st, u.tracking) {
				tracked = st.Tracking
			}
			if u.report != nil {
				prev := st.CurrentEpoch
				ApplyReport(job, st, u.report)
				if u.report.Epoch != nil {
					forecast.ObserveReport(st, prev, s.Clock.Now())
				}
			}
			if u.checkpoint != nil {
				ApplyCheckpoint(st, u.checkpoint, u.attempt, s.Clock.Now())
			}
		}
		if equality.Semantic.DeepEqual(*st, job.Status) {
			return nil
		}
		job.Status = *st
		written = job
		return s.Client.Status().Update(ctx, job)
	})
	if err == nil && tracked != nil && s.Recorder != nil {
		s.Recorder.Eventf(written, nil, corev1.EventTypeNormal, ReasonTrackingRun, "RecordProgress", "every attempt logs into tracker run %s", trackingSummary(tracked))
	}
	for i, u := range updates {
		u.done <- cmp.Or(refused[i], err)
	}
	return err
}

// refuse returns why st refuses u, or nil.
func refuse(st *convoy.TrainingJobStatus, u *update) error {
	if u.attempt != st.RestartCount {
		return refusal{code: http.StatusConflict, reason: fmt.Sprintf("the report comes from attempt %d of the gang, and the job is at attempt %d (status.restartCount): reports of another attempt are refused", u.attempt, st.RestartCount)}
	}
	if t, have := u.tracking, st.Tracking; t != nil && have != nil {
		if t.MLflowRunID != "" && have.MLflowRunID != "" && t.MLflowRunID != have.MLflowRunID {
			return refusal{code: http.StatusConflict, reason: fmt.Sprintf("the job logs into MLflow run %s (status.tracking.mlflowRunID), not %s: start the run with MLFLOW_RUN_ID, which the operator sets", have.MLflowRunID, t.MLflowRunID)}
		}
		if t.URL != "" && have.URL != "" && t.URL != have.URL {
			return refusal{code: http.StatusConflict, reason: fmt.Sprintf("the job's run is at %s (status.tracking.url), not %s: a job's run does not change", have.URL, t.URL)}
		}
	}
	if c, latest := u.checkpoint, st.Checkpoint; c != nil && latest != nil && latest.Attempt == u.attempt && c.Epoch < latest.Epoch {
		return refusal{code: http.StatusConflict, reason: fmt.Sprintf("checkpoint of epoch %d is older than this attempt's latest, of epoch %d: checkpoints only move forward", c.Epoch, latest.Epoch)}
	}
	return nil
}

// ReasonTrackingRun is the Event reason of a job's tracker run, recorded the first time.
const ReasonTrackingRun = "TrackingRunRecorded"

func trackingSummary(t *convoy.TrackingStatus) string {
	var parts []string
	if t.MLflowRunID != "" {
		parts = append(parts, "MLflow "+t.MLflowRunID)
	}
	if t.WandbRunID != "" {
		parts = append(parts, "W&B "+t.WandbRunID)
	}
	if t.URL != "" {
		parts = append(parts, t.URL)
	}
	return strings.Join(parts, ", ")
}
