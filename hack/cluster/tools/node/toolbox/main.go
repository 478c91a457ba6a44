// toolbox is the one static binary in the harness's tiny images: the pod sandbox ("pause": sleep until a signal,
// reap zombies as PID 1) and the probes the cluster's own tests run inside pods, where no shell or nc exists.
//
//	toolbox pause                 sleep until SIGTERM/SIGINT
//	toolbox serve ADDR TEXT       answer every TCP connection on ADDR with TEXT, then close it
//	toolbox get HOST:PORT         print what the server at HOST:PORT sends
//	toolbox connect HOST:PORT     open a TCP connection and say so (servers that wait for the client, like TLS)
//	toolbox lookup NAME           print NAME's addresses from the resolver in /etc/resolv.conf
//	toolbox env                   print the environment
//	toolbox sleep SECONDS
//	toolbox exit CODE
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "toolbox: "+format+"\n", args...)
	os.Exit(2)
}

func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}

func serve(addr, text string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		die("listen %s: %v", addr, err)
	}
	fmt.Printf("serving on %s\n", ln.Addr())
	for {
		conn, err := ln.Accept()
		if err != nil {
			die("accept: %v", err)
		}
		go func(c net.Conn) {
			defer c.Close()
			_, _ = io.WriteString(c, text+"\n")
		}(conn)
	}
}

func get(addr string) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		die("connect %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(os.Stdout, conn); err != nil {
		die("read %s: %v", addr, err)
	}
}

func lookup(name string) {
	addrs, err := net.LookupHost(name)
	if err != nil {
		die("lookup %s: %v", name, err)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		fmt.Println(a)
	}
}

func main() {
	args := os.Args[1:]
	// As a sandbox image's entrypoint it may be started as /pause with no arguments.
	if filepath.Base(os.Args[0]) == "pause" || len(args) == 0 {
		pause()
		return
	}
	need := func(n int) {
		if len(args) < n+1 {
			die("%s needs %d argument(s)", args[0], n)
		}
	}
	switch args[0] {
	case "pause":
		pause()
	case "serve":
		need(2)
		serve(args[1], args[2])
	case "get":
		need(1)
		get(args[1])
	case "connect":
		need(1)
		conn, err := net.DialTimeout("tcp", args[1], 5*time.Second)
		if err != nil {
			die("connect %s: %v", args[1], err)
		}
		fmt.Printf("connected to %s\n", conn.RemoteAddr())
		conn.Close()
	case "lookup":
		need(1)
		lookup(args[1])
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "sleep":
		need(1)
		s, err := strconv.ParseFloat(args[1], 64)
		if err != nil {
			die("sleep: %v", err)
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
	case "exit":
		need(1)
		code, err := strconv.Atoi(args[1])
		if err != nil {
			die("exit: %v", err)
		}
		os.Exit(code)
	default:
		die("unknown command %q (pause, serve, get, connect, lookup, env, sleep, exit)", args[0])
	}
}
