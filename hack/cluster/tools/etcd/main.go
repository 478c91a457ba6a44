// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so the test cluster needs no release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
