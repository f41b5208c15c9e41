// Command etcd is the etcd server built from the pinned go.etcd.io/etcd/server/v3 module, so the local
// control plane needs no downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
