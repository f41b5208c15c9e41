package stack

import (
	"io"
	"net"
	"time"
)

// relay listens on addr for as long as the process runs and relays each connection to the first
// of backends that accepts it, as a Service in front of several replicas would: a replica that has
// died refuses the connection and the next one gets it.
func relay(addr string, backends []string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go relayConn(conn, backends)
		}
	}()
	return nil
}

func relayConn(conn net.Conn, backends []string) {
	defer conn.Close()
	for _, b := range backends {
		up, err := net.DialTimeout("tcp", b, time.Second)
		if err != nil {
			continue
		}
		defer up.Close()
		go func() {
			_, _ = io.Copy(up, conn)
			_ = up.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(conn, up)
		return
	}
}
