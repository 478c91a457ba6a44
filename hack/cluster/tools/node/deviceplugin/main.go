// deviceplugin advertises fake NVIDIA devices to one kubelet over the device-plugin API (v1beta1), so the test
// cluster's scheduler and kubelet do real GPU accounting on machines without GPUs.
//
//	deviceplugin --dir DIR --node NAME --resource nvidia.com/gpu=4 [--resource nvidia.com/mig-1g.10gb=2]
//	             [--health-file FILE]
//
// One gRPC server per resource, each on its own socket in DIR (the kubelet's device-plugins directory), registered
// with DIR/kubelet.sock. The kubelet deletes plugin sockets when it restarts: the plugin notices its socket is gone
// and registers again, as NVIDIA's plugin does. Allocate answers with NVIDIA_VISIBLE_DEVICES set to the allocated
// device ids, the envvar strategy of NVIDIA's plugin, and CUDA_VISIBLE_DEVICES set to 0..n-1 (see visibleEnvs).
// Device ids listed in --health-file (one a line) are reported Unhealthy while listed, the way a plugin reports an
// XID error.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type resources []string

func (r *resources) String() string     { return strings.Join(*r, ",") }
func (r *resources) Set(v string) error { *r = append(*r, v); return nil }

// plugin serves one extended resource.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource   string
	ids        []string
	dir        string
	socket     string
	healthFile string

	mu      sync.Mutex
	health  map[string]string
	changed chan struct{}
	server  *grpc.Server
}

func newPlugin(dir, node, spec, healthFile string) (*plugin, error) {
	name, countText, ok := strings.Cut(spec, "=")
	count, err := strconv.Atoi(countText)
	if !ok || err != nil || count < 1 || !strings.Contains(name, "/") {
		return nil, fmt.Errorf("--resource %q: want DOMAIN/NAME=COUNT with COUNT >= 1, e.g. nvidia.com/gpu=4", spec)
	}
	kind := name[strings.Index(name, "/")+1:]
	p := &plugin{
		resource:   name,
		dir:        dir,
		socket:     filepath.Join(dir, "tabjob-"+strings.NewReplacer("/", "-", ".", "-").Replace(name)+".sock"),
		healthFile: healthFile,
		health:     map[string]string{},
		changed:    make(chan struct{}, 1),
	}
	for i := 0; i < count; i++ {
		// The shape of NVIDIA's ids (GPU-<uuid>, MIG-<uuid>), unique per node and resource.
		prefix := "GPU"
		if strings.HasPrefix(kind, "mig-") {
			prefix = "MIG"
		}
		id := fmt.Sprintf("%s-%s-%s-%d", prefix, node, kind, i)
		p.ids = append(p.ids, id)
		p.health[id] = pluginapi.Healthy
	}
	return p, nil
}

func (p *plugin) devices() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pluginapi.Device, 0, len(p.ids))
	for _, id := range p.ids {
		out = append(out, &pluginapi.Device{ID: id, Health: p.health[id]})
	}
	return out
}

// pollHealth re-reads the health file and wakes ListAndWatch when any device's health changed.
func (p *plugin) pollHealth() {
	if p.healthFile == "" {
		return
	}
	bad := map[string]bool{}
	if data, err := os.ReadFile(p.healthFile); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			bad[strings.TrimSpace(line)] = true
		}
	}
	p.mu.Lock()
	changed := false
	for _, id := range p.ids {
		want := pluginapi.Healthy
		if bad[id] {
			want = pluginapi.Unhealthy
		}
		if p.health[id] != want {
			p.health[id] = want
			changed = true
		}
	}
	p.mu.Unlock()
	if changed {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
			return err
		}
		select {
		case <-p.changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := append([]string(nil), c.DevicesIds...)
		sort.Strings(ids)
		for _, id := range ids {
			if _, ok := p.health[id]; !ok {
				return nil, fmt.Errorf("unknown %s device %q", p.resource, id)
			}
		}
		log.Printf("%s: allocate %v", p.resource, ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: visibleEnvs(ids),
		})
	}
	return resp, nil
}

// visibleEnvs is what a container's processes learn about their devices. NVIDIA's plugin itself answers only
// NVIDIA_VISIBLE_DEVICES=<ids> (its envvar strategy); the NVIDIA container toolkit then mounts just those devices'
// nodes, so CUDA in the container enumerates exactly the allocated devices, numbered 0..n-1, and the toolkit leaves
// CUDA_VISIBLE_DEVICES unset (NVIDIA declined to add it there). The test bed has no toolkit and no device node to
// hide, so the fake states that view outright: CUDA_VISIBLE_DEVICES lists the container-local ordinals, never the
// host ids, which mean nothing inside a container. A program that honours CUDA_VISIBLE_DEVICES counts the same
// devices here as on a real GPU node, where the variable is unset and CUDA sees only the allocated devices.
func visibleEnvs(ids []string) map[string]string {
	ordinals := make([]string, len(ids))
	for i := range ids {
		ordinals[i] = strconv.Itoa(i)
	}
	return map[string]string{
		"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ","),
		"CUDA_VISIBLE_DEVICES":   strings.Join(ordinals, ","),
	}
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// start serves on a fresh socket and registers with the kubelet.
func (p *plugin) start() error {
	_ = os.Remove(p.socket)
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("listen %s: %w", p.socket, err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(ln) }()

	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		p.server.Stop()
		return fmt.Errorf("register %s with the kubelet: %w", p.resource, err)
	}
	log.Printf("%s: registered %d devices (%s)", p.resource, len(p.ids), p.socket)
	return nil
}

func (p *plugin) stop() {
	if p.server != nil {
		p.server.Stop()
		p.server = nil
	}
}

func main() {
	var res resources
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory")
	node := flag.String("node", "", "the node's name (part of every device id)")
	healthFile := flag.String("health-file", "", "device ids listed here (one a line) are reported Unhealthy")
	flag.Var(&res, "resource", "DOMAIN/NAME=COUNT to advertise (repeatable)")
	flag.Parse()
	if *node == "" || len(res) == 0 {
		log.Fatal("--node and at least one --resource are required")
	}
	var plugins []*plugin
	for _, spec := range res {
		p, err := newPlugin(*dir, *node, spec, *healthFile)
		if err != nil {
			log.Fatal(err)
		}
		plugins = append(plugins, p)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, p := range plugins {
			// Not serving, or the kubelet restarted and removed our socket: (re)register.
			if _, err := os.Stat(p.socket); p.server == nil || err != nil {
				p.stop()
				if err := p.start(); err != nil {
					log.Printf("%v (retrying)", err)
				}
			}
			p.pollHealth()
		}
		select {
		case <-sigs:
			for _, p := range plugins {
				p.stop()
				_ = os.Remove(p.socket)
			}
			return
		case <-tick.C:
		}
	}
}
