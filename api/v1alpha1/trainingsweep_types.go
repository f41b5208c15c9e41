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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectiveType says whether the objective metric is to be maximized or minimized.
// +kubebuilder:validation:Enum=maximize;minimize
type ObjectiveType string

const (
	ObjectiveMaximize ObjectiveType = "maximize"
	ObjectiveMinimize ObjectiveType = "minimize"
)

// ObjectiveSpec is what a sweep optimizes: one metric the trials' training code reports.
type ObjectiveSpec struct {
	// type is maximize or minimize.
	// +required
	Type ObjectiveType `json:"type"`

	// objectiveMetricName is the reported metric to optimize: accuracy, loss, or the name of any
	// other metric the training code reports in its progress (status.metrics.additional).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ObjectiveMetricName string `json:"objectiveMetricName"`

	// goal ends the sweep, Succeeded with reason GoalReached, once a trial reports a value at least
	// as good: at or above it when maximizing, at or below it when minimizing. Running trials are
	// then stopped.
	// +optional
	Goal *float64 `json:"goal,omitempty"`
}

// ParameterType is the type of a tuned parameter.
// +kubebuilder:validation:Enum=double;int;categorical;discrete
type ParameterType string

const (
	ParameterDouble      ParameterType = "double"
	ParameterInt         ParameterType = "int"
	ParameterCategorical ParameterType = "categorical"
	ParameterDiscrete    ParameterType = "discrete"
)

// Distribution is how values are drawn between min and max.
// +kubebuilder:validation:Enum=uniform;logUniform
type Distribution string

const (
	DistributionUniform    Distribution = "uniform"
	DistributionLogUniform Distribution = "logUniform"
)

// FeasibleSpace is the values a parameter may take: min and max (with an optional step) for
// double and int, list for categorical and discrete.
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || double(self.min) < double(self.max)",message="feasibleSpace.min must be less than feasibleSpace.max"
// +kubebuilder:validation:XValidation:rule="!has(self.distribution) || self.distribution != 'logUniform' || (has(self.min) && double(self.min) > 0.0)",message="feasibleSpace.min must be greater than 0 with distribution logUniform"
// +kubebuilder:validation:XValidation:rule="!has(self.step) || double(self.step) > 0.0",message="feasibleSpace.step must be greater than 0"
type FeasibleSpace struct {
	// min is the lowest value, a number such as "0.0001" or "16".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Min string `json:"min,omitempty"`

	// max is the highest value, a number.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Max string `json:"max,omitempty"`

	// step, for double and int, spaces the values grid search tries (min, min+step, ... up to
	// max); the other algorithms round their values to it. Unset, grid search tries 10 values of a
	// double and every int.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Step string `json:"step,omitempty"`

	// list is the values of a categorical or discrete parameter.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	List []string `json:"list,omitempty"`

	// distribution is uniform (the default) or logUniform (uniform in the logarithm, for learning
	// rates and other scales; min must be above 0).
	// +optional
	Distribution Distribution `json:"distribution,omitempty"`
}

// ParameterSpec is one tuned parameter.
// +kubebuilder:validation:XValidation:rule="!(self.parameterType in ['double', 'int']) || (has(self.feasibleSpace.min) && has(self.feasibleSpace.max))",message="feasibleSpace.min and feasibleSpace.max are required for a double or int parameter"
// +kubebuilder:validation:XValidation:rule="!(self.parameterType in ['categorical', 'discrete']) || (has(self.feasibleSpace.list) && size(self.feasibleSpace.list) > 0)",message="feasibleSpace.list is required for a categorical or discrete parameter"
// +kubebuilder:validation:XValidation:rule="self.parameterType != 'int' || ((!has(self.feasibleSpace.min) || self.feasibleSpace.min.matches('^[-+]?[0-9]+$')) && (!has(self.feasibleSpace.max) || self.feasibleSpace.max.matches('^[-+]?[0-9]+$')))",message="feasibleSpace.min and max of an int parameter must be integers"
// +kubebuilder:validation:XValidation:rule="self.parameterType != 'discrete' || !has(self.feasibleSpace.list) || self.feasibleSpace.list.all(v, v.matches('^[-+]?([0-9]+\\\\.?[0-9]*|\\\\.[0-9]+)([eE][-+]?[0-9]+)?$'))",message="feasibleSpace.list of a discrete parameter must hold numbers: use parameterType categorical for other values"
type ParameterSpec struct {
	// name is how the trial template refers to the parameter: ${trialParameters.<name>}. A double
	// or int parameter named learningRate, batchSize, warmupSteps or gradientAccumulationSteps also
	// sets that field of the trials' spec.hyperparameters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_.-]*$`
	Name string `json:"name"`

	// parameterType is double, int, categorical or discrete (numbers from a list).
	// +required
	ParameterType ParameterType `json:"parameterType"`

	// feasibleSpace is the values the parameter may take.
	// +required
	FeasibleSpace FeasibleSpace `json:"feasibleSpace"`
}

// AlgorithmName is a search algorithm.
// +kubebuilder:validation:Enum=grid;random;tpe;hyperband
type AlgorithmName string

const (
	AlgorithmGrid      AlgorithmName = "grid"
	AlgorithmRandom    AlgorithmName = "random"
	AlgorithmTPE       AlgorithmName = "tpe"
	AlgorithmHyperband AlgorithmName = "hyperband"
)

// AlgorithmSetting is one named setting of an algorithm, as Katib spells them.
type AlgorithmSetting struct {
	// name is the setting's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// value is the setting's value, a number.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Value string `json:"value"`
}

// AlgorithmSpec chooses how parameters are suggested.
// +kubebuilder:validation:XValidation:rule="!has(self.algorithmSettings) || self.algorithmSettings.all(s, s.name == 'random_state' || (self.algorithmName == 'tpe' && s.name in ['n_startup_trials', 'n_ei_candidates']) || (self.algorithmName == 'hyperband' && s.name in ['eta', 'min_resource']))",message="algorithm.algorithmSettings: grid and random take random_state; tpe also n_startup_trials and n_ei_candidates; hyperband also eta and min_resource"
// +kubebuilder:validation:XValidation:rule="!has(self.algorithmSettings) || self.algorithmSettings.all(s, s.name != 'eta' || double(s.value) >= 2.0)",message="algorithm.algorithmSettings eta must be at least 2"
// +kubebuilder:validation:XValidation:rule="!has(self.algorithmSettings) || self.algorithmSettings.all(s, !(s.name in ['min_resource', 'n_startup_trials', 'n_ei_candidates']) || (s.value.matches('^[0-9]+$') && int(s.value) >= 1))",message="algorithm.algorithmSettings min_resource, n_startup_trials and n_ei_candidates must be whole numbers of at least 1"
type AlgorithmSpec struct {
	// algorithmName is grid (every combination, in order), random (uniform or log-uniform draws),
	// tpe (Bayesian optimization with a tree-structured Parzen estimator) or hyperband
	// (asynchronous successive halving over epochs: trials pause at each rung and only the best
	// 1/eta resume, from their own checkpoints).
	// +required
	AlgorithmName AlgorithmName `json:"algorithmName"`

	// algorithmSettings tune the algorithm: random_state (every algorithm: the seed, default 1);
	// for tpe n_startup_trials (random trials before the model is used, default 5) and
	// n_ei_candidates (candidates drawn per suggestion, default 24); for hyperband eta (the
	// reduction factor, default 3) and min_resource (the epochs of the first rung, default 1).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	AlgorithmSettings []AlgorithmSetting `json:"algorithmSettings,omitempty"`
}

// EarlyStoppingAlgorithm is an early-stopping rule.
// +kubebuilder:validation:Enum=medianstop
type EarlyStoppingAlgorithm string

// EarlyStoppingMedian stops a trial whose objective is worse than the median of the succeeded
// trials' at the same epoch.
const EarlyStoppingMedian EarlyStoppingAlgorithm = "medianstop"

// EarlyStoppingSpec stops losing trials before their last epoch.
// +kubebuilder:validation:XValidation:rule="!has(self.algorithmSettings) || self.algorithmSettings.all(s, s.name in ['min_trials_required', 'start_step'] && s.value.matches('^[0-9]+$') && int(s.value) >= 1)",message="earlyStopping.algorithmSettings are min_trials_required and start_step, whole numbers of at least 1"
type EarlyStoppingSpec struct {
	// algorithmName is medianstop: a running trial whose objective at an epoch is worse than the
	// median of the succeeded trials' objective at that epoch is stopped (EarlyStopped).
	// +required
	AlgorithmName EarlyStoppingAlgorithm `json:"algorithmName"`

	// algorithmSettings: min_trials_required (succeeded trials needed before any trial is
	// stopped, default 3) and start_step (the first epoch at which a trial may be stopped,
	// default 1).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=2
	AlgorithmSettings []AlgorithmSetting `json:"algorithmSettings,omitempty"`
}

// TrialTemplate is the TrainingJob each trial runs.
type TrialTemplate struct {
	// metadata holds labels and annotations every trial gets.
	// +optional
	Metadata *TrialMetadata `json:"metadata,omitempty"`

	// spec is the trials' TrainingJob spec. ${trialParameters.<name>} in
	// spec.hyperparameters.additionalParams values, spec.hyperparameters.optimizer, spec.env
	// values, spec.args and spec.command is replaced by the trial's value of the parameter
	// <name>. Trials are queued in spec.scheduling.queue and, unless it names one, with the
	// priority class "low" (deploy/queue). Hyperband needs spec.hyperparameters.epochs (the most
	// epochs a trial runs) and checkpointing, so that a promoted trial resumes from its own
	// checkpoint.
	// +required
	Spec TrainingJobSpec `json:"spec"`
}

// TrialMetadata is the metadata a trial TrainingJob gets from the template.
type TrialMetadata struct {
	// labels are added to every trial.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`
	// annotations are added to every trial.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TrainingSweepSpec is a hyperparameter search: trials of one TrainingJob template with
// parameters suggested by an algorithm, shaped like Katib's v1beta1 Experiment.
// +kubebuilder:validation:XValidation:rule="self.parameters.all(p, self.parameters.exists_one(q, q.name == p.name))",message="spec.parameters names must be unique",fieldPath=".parameters"
// +kubebuilder:validation:XValidation:rule="self.algorithm.algorithmName != 'hyperband' || (has(self.trialTemplate.spec.hyperparameters) && has(self.trialTemplate.spec.hyperparameters.epochs))",message="spec.trialTemplate.spec.hyperparameters.epochs is required with algorithm hyperband: it is the most epochs a trial runs",fieldPath=".trialTemplate.spec.hyperparameters"
// +kubebuilder:validation:XValidation:rule="self.algorithm.algorithmName != 'hyperband' || (has(self.trialTemplate.spec.checkpoint) && self.trialTemplate.spec.checkpoint.enabled)",message="spec.trialTemplate.spec.checkpoint.enabled must be true with algorithm hyperband: a promoted trial resumes from its checkpoint",fieldPath=".trialTemplate.spec.checkpoint"
// +kubebuilder:validation:XValidation:rule="self.algorithm.algorithmName != 'hyperband' || !has(self.earlyStopping)",message="spec.earlyStopping does not apply with algorithm hyperband, whose rungs stop trials: remove it",fieldPath=".earlyStopping"
// +kubebuilder:validation:XValidation:rule="self.algorithm.algorithmName != 'grid' || self.parameters.all(p, p.parameterType != 'double' || has(p.feasibleSpace.step))",message="spec.parameters: grid search needs feasibleSpace.step for every double parameter",fieldPath=".parameters"
// +kubebuilder:validation:XValidation:rule="!has(self.trialTemplate.spec.suspend) || !self.trialTemplate.spec.suspend",message="spec.trialTemplate.spec.suspend must be false: the sweep starts and pauses trials itself",fieldPath=".trialTemplate.spec.suspend"
type TrainingSweepSpec struct {
	// objective is the metric the sweep optimizes.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.objective is immutable: create a new TrainingSweep"
	Objective ObjectiveSpec `json:"objective"`

	// algorithm suggests each trial's parameters.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.algorithm is immutable: create a new TrainingSweep"
	Algorithm AlgorithmSpec `json:"algorithm"`

	// earlyStopping stops trials that are losing before their last epoch (not with hyperband,
	// whose rungs do that).
	// +optional
	EarlyStopping *EarlyStoppingSpec `json:"earlyStopping,omitempty"`

	// parameters are the tuned parameters and their feasible spaces.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.parameters is immutable: create a new TrainingSweep"
	Parameters []ParameterSpec `json:"parameters"`

	// parallelTrialCount is how many trials may be queued or running at once; trials paused at a
	// hyperband rung hold no GPUs and do not count.
	// Kueue still admits only what the queue's quota holds. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	ParallelTrialCount *int32 `json:"parallelTrialCount,omitempty"`

	// maxTrialCount is how many trials the sweep runs in all. Defaults to 10; grid search stops
	// earlier once every combination ran.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MaxTrialCount *int32 `json:"maxTrialCount,omitempty"`

	// maxFailedTrialCount fails the sweep (reason MaxFailedTrialsReached) once more trials than
	// this have failed; its unfinished trials are then stopped. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	MaxFailedTrialCount *int32 `json:"maxFailedTrialCount,omitempty"`

	// trialTemplate is the TrainingJob every trial runs, with the trial's parameters in it.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.trialTemplate is immutable: create a new TrainingSweep"
	TrialTemplate TrialTemplate `json:"trialTemplate"`
}

// TrainingSweepState summarises a sweep.
// +kubebuilder:validation:Enum=Created;Running;Succeeded;Failed
type TrainingSweepState string

const (
	SweepCreated   TrainingSweepState = "Created"
	SweepRunning   TrainingSweepState = "Running"
	SweepSucceeded TrainingSweepState = "Succeeded"
	SweepFailed    TrainingSweepState = "Failed"
)

// TrialState is a trial's state as the sweep sees it.
// +kubebuilder:validation:Enum=Pending;Running;Paused;Succeeded;EarlyStopped;Failed
type TrialState string

const (
	// TrialPending: created, waiting for admission or for its pods to run.
	TrialPending TrialState = "Pending"
	// TrialRunning: its gang runs.
	TrialRunning TrialState = "Running"
	// TrialPaused: hyperband paused it at a rung; it holds no GPUs nor quota until promoted.
	TrialPaused TrialState = "Paused"
	// TrialSucceeded: it ran every epoch.
	TrialSucceeded TrialState = "Succeeded"
	// TrialEarlyStopped: the early-stopping rule or a hyperband rung stopped it; not a failure.
	TrialEarlyStopped TrialState = "EarlyStopped"
	// TrialFailed: its TrainingJob failed.
	TrialFailed TrialState = "Failed"
)

// ParameterAssignment is one parameter's value in a trial.
type ParameterAssignment struct {
	// name is the parameter's name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// value is the parameter's value, as substituted into the template.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value"`
}

// Observation is a trial's objective at one epoch.
type Observation struct {
	// epoch is the epoch the value was reported at.
	// +required
	Epoch int32 `json:"epoch"`
	// value is the objective metric's value.
	// +required
	Value float64 `json:"value"`
}

// TrialStatus is one trial as the sweep sees it.
type TrialStatus struct {
	// name is the trial's TrainingJob.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// state is Pending, Running, Paused, Succeeded, EarlyStopped or Failed.
	// +required
	State TrialState `json:"state"`
	// parameterAssignments are the trial's parameter values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ParameterAssignments []ParameterAssignment `json:"parameterAssignments,omitempty"`
	// value is the objective at the latest epoch observed.
	// +optional
	Value *float64 `json:"value,omitempty"`
	// epoch is the latest epoch observed.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
	// resumedFromEpoch is the epoch of the checkpoint the trial last resumed from after a
	// hyperband promotion.
	// +optional
	ResumedFromEpoch int32 `json:"resumedFromEpoch,omitempty"`
	// rung is the hyperband rung the trial reached (0 is the first).
	// +optional
	Rung int32 `json:"rung,omitempty"`
	// observations are the objective at each epoch observed, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Observations []Observation `json:"observations,omitempty"`
	// message says why the trial stopped or failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// cost is the trial's cost as its TrainingJob last showed it.
	// +optional
	Cost *CostTotal `json:"cost,omitempty"`
}

// BestTrial is the trial with the best objective so far.
type BestTrial struct {
	// name is the trial's TrainingJob.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// parameterAssignments are its parameter values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ParameterAssignments []ParameterAssignment `json:"parameterAssignments,omitempty"`
	// value is its objective.
	// +required
	Value float64 `json:"value"`
	// epoch is the epoch it was reported at.
	// +optional
	Epoch int32 `json:"epoch,omitempty"`
}

// Condition types and reasons of a TrainingSweep.
const (
	// SweepConditionRunning is true while the sweep has trials to run.
	SweepConditionRunning = "Running"
	// SweepConditionSucceeded is true once the sweep ended: goal reached, trials or search space exhausted.
	SweepConditionSucceeded = "Succeeded"
	// SweepConditionFailed is true once the sweep failed.
	SweepConditionFailed = "Failed"

	SweepReasonTrialsRunning          = "TrialsRunning"
	SweepReasonGoalReached            = "GoalReached"
	SweepReasonMaxTrialsReached       = "MaxTrialsReached"
	SweepReasonSearchSpaceExhausted   = "SearchSpaceExhausted"
	SweepReasonMaxFailedTrialsReached = "MaxFailedTrialsReached"
	SweepReasonInvalidTemplate        = "InvalidTrialTemplate"

	// ReasonEarlyStopped is the reason of a trial TrainingJob's Completed condition when the sweep
	// stopped it: early stopping, a hyperband rung, or the sweep's end.
	ReasonEarlyStopped = "EarlyStopped"
)

// Labels and annotations of a sweep's trials.
const (
	// LabelSweepName carries the sweep's name on each of its trial TrainingJobs.
	LabelSweepName = "convoy.dev/sweep"
	// AnnotationTrialParameters holds a trial's parameter assignments as JSON.
	AnnotationTrialParameters = "convoy.dev/trial-parameters"
)

// TrainingSweepStatus is what the operator observed of a sweep.
type TrainingSweepStatus struct {
	// state is Created, Running, Succeeded or Failed, derived from the conditions.
	// +optional
	State TrainingSweepState `json:"state,omitempty"`
	// conditions are Running, Succeeded, Failed and ChildConflict (a TrainingJob the sweep does not
	// control has the name of its next trial).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// trialsSummary is "running/succeeded/stopped/failed" for kubectl get's TRIALS column.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TrialsSummary string `json:"trialsSummary,omitempty"`
	// trials counts every trial created.
	// +optional
	Trials int32 `json:"trials,omitempty"`
	// pendingTrials are queued or starting.
	// +optional
	PendingTrials int32 `json:"pendingTrials,omitempty"`
	// runningTrials run now.
	// +optional
	RunningTrials int32 `json:"runningTrials,omitempty"`
	// pausedTrials wait at a hyperband rung, holding no GPUs.
	// +optional
	PausedTrials int32 `json:"pausedTrials,omitempty"`
	// succeededTrials ran every epoch.
	// +optional
	SucceededTrials int32 `json:"succeededTrials,omitempty"`
	// earlyStoppedTrials were stopped by early stopping or a rung.
	// +optional
	EarlyStoppedTrials int32 `json:"earlyStoppedTrials,omitempty"`
	// failedTrials failed.
	// +optional
	FailedTrials int32 `json:"failedTrials,omitempty"`
	// bestTrial is the trial with the best objective so far.
	// +optional
	BestTrial *BestTrial `json:"bestTrial,omitempty"`
	// trialStatuses are the trials, oldest first.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=200
	TrialStatuses []TrialStatus `json:"trialStatuses,omitempty"`
	// cost sums the cost of the sweep's trials, deleted trials included.
	// +optional
	Cost *CostTotal `json:"cost,omitempty"`
	// deletedTrialsCost is the cost of the trials whose TrainingJobs were deleted, as their last
	// status showed it: the GPUs they held stay spent, so cost keeps counting them.
	// +optional
	DeletedTrialsCost *CostTotal `json:"deletedTrialsCost,omitempty"`
	// startTime is when the sweep was first reconciled.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when it succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// observedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// TrainingSweep tunes a TrainingJob's hyperparameters: it runs trials, each a TrainingJob queued
// through Kueue, with parameters suggested by grid, random, tpe or hyperband, and stops losing
// trials early.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sweep;sweeps,categories=convoy
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Trials",type=string,JSONPath=`.status.trialsSummary`,description="running/succeeded/stopped/failed"
// +kubebuilder:printcolumn:name="Best",type=number,JSONPath=`.status.bestTrial.value`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.cost.summary`
// +kubebuilder:printcolumn:name="Best-Trial",type=string,JSONPath=`.status.bestTrial.name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters: trials are named <name>-<n> and a TrainingJob's name is at most 48"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must start with a letter and contain only lowercase letters, digits and '-': it names the trials"
type TrainingSweep struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the search.
	// +required
	Spec TrainingSweepSpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status TrainingSweepStatus `json:"status,omitempty"`
}

// TrainingSweepList is a list of TrainingSweeps.
// +kubebuilder:object:root=true
type TrainingSweepList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingSweep `json:"items"`
}

func init() {
	register(&TrainingSweep{}, &TrainingSweepList{})
}
