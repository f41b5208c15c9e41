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

package mlframework

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	convoy "github.com/convoy-dev/convoy/api/v1alpha1"
)

func init() { Register(convoy.FrameworkMPI, mpi{}) }

// mpi runs an Open MPI job as mpi-operator v2 does with runLauncherAsWorker: worker 0 is the
// launcher and runs the job's command (mpirun ...), the other workers run sshd, and every worker
// is a host of the hostfile with gpusPerWorker slots. The job succeeds when the launcher does.
type mpi struct{ Workers }

// Where the MPI files are mounted, as in mpi-operator.
const (
	MPIHostfileDir  = "/etc/mpi"
	MPIHostfileKey  = "hostfile"
	SSHAuthMountDir = "/root/.ssh"
	// SSHPrivateKey and SSHPublicKey are the keys of the kubernetes.io/ssh-auth Secret SSHSecretName.
	SSHPrivateKey = corev1.SSHAuthPrivateKey
	SSHPublicKey  = "ssh-publickey"
)

// sshdCommand is what the non-launcher workers run: an SSH daemon in the foreground, logging to stderr.
var sshdCommand = []string{"/usr/sbin/sshd", "-De"}

func (mpi) DefaultImage() string { return "mpioperator/openmpi:v0.6.0" }

func (mpi) NeedsSSHKeys() bool { return true }

// PodSecurity is baseline: sshd runs as root and needs SETUID, SETGID and SYS_CHROOT, which
// restricted forbids.
func (mpi) PodSecurity() convoy.PodSecurityLevel { return convoy.PodSecurityBaseline }

func (mpi) MustSucceed(r Replica) bool { return r == Master }

func (mpi) ConfigFiles(job *convoy.TrainingJob) map[string]string {
	var b strings.Builder
	for _, r := range replicas(RoleWorker, job.Spec.NumWorkers) {
		fmt.Fprintf(&b, "%s slots=%d\n", Host(job, r), slots(job))
	}
	return map[string]string{MPIHostfileKey: b.String()}
}

func slots(job *convoy.TrainingJob) int32 { return max(job.GPUsPerWorker(), 1) }

func (mpi) Configure(job *convoy.TrainingJob, r Replica, pod *corev1.Pod) {
	hostfile := MPIHostfileDir + "/" + MPIHostfileKey
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "mpi-hostfile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(job)},
			Items:                []corev1.KeyToPath{{Key: MPIHostfileKey, Path: MPIHostfileKey}},
		}}},
		corev1.Volume{Name: "ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  SSHSecretName(job),
			DefaultMode: ptr.To[int32](0o600),
			Items: []corev1.KeyToPath{
				{Key: SSHPrivateKey, Path: "id_rsa"},
				{Key: SSHPublicKey, Path: "id_rsa.pub"},
				{Key: SSHPublicKey, Path: "authorized_keys"},
			},
		}}},
	)
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: "mpi-hostfile", MountPath: MPIHostfileDir, ReadOnly: true},
		corev1.VolumeMount{Name: "ssh-auth", MountPath: SSHAuthMountDir, ReadOnly: true},
	)
	// sshd switches users and chroots for privilege separation: the only capabilities given back
	// after the pod's default of dropping all.
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	if c.SecurityContext.Capabilities == nil {
		c.SecurityContext.Capabilities = &corev1.Capabilities{}
	}
	c.SecurityContext.Capabilities.Add = []corev1.Capability{"SETUID", "SETGID", "SYS_CHROOT", "NET_BIND_SERVICE"}
	AddPort(pod, "ssh", 22)
	if r != Master {
		c.Command, c.Args = sshdCommand, nil
		return
	}
	SetEnv(pod,
		"OMPI_MCA_orte_default_hostfile", hostfile,
		"OMPI_MCA_orte_keep_fqdn_hostnames", "true",
		"OMPI_MCA_orte_set_default_slots", itoa(slots(job)),
		"OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10",
		"I_MPI_HYDRA_HOST_FILE", hostfile,
		"I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10",
	)
}
