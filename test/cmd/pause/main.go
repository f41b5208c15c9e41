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

// Command pause is the pod sandbox ("pause") container that containerd starts first in every pod:
// it holds the pod's namespaces open, reaps the zombies of processes that share its PID namespace,
// and exits 0 on SIGTERM or SIGINT. It is built static (CGO_ENABLED=0) for an image without libc.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("convoy pause")
		return
	}
	// Separate channels: signal.Notify drops a signal whose channel is full, and a burst of
	// SIGCHLD must not crowd out SIGTERM.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case sig := <-stop:
			fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", sig)
			return
		case <-children:
			reap()
		}
	}
}

// reap waits for every child that has exited, without blocking: as PID 1 of a pod with a shared
// PID namespace, the sandbox inherits the orphans of the pod's other containers.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
