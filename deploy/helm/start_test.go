package helm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The rendered container runs: sluice started with the chart's args (the
// embedded store, every door on, the passwords from the Secret), the
// mounted files laid out as Kubernetes would mount them, answers its
// probes, takes the Secret's passwords and decides with the ConfigMap's
// policy, and stops cleanly on SIGTERM. Only the paths (/etc/sluice → a
// temporary directory) and the listen addresses (every address → 127.0.0.1)
// are changed.
func TestChartContainerRuns(t *testing.T) {
	t.Parallel()
	bin := sluiceBin(t)
	ports := freePorts(t, 4)
	o := render(t, readValues(t, fmt.Sprintf(`
ports: {resp: %d, admin: %d}
http: {enabled: true, port: %d}
grpc: {enabled: true, port: %d}
secrets:
  requirepass: client-Pw1
  adminPass: admin-Pw2
log: {format: text}
`, ports[0], ports[1], ports[2], ports[3])))
	d := o.deployment(t)
	c := container(t, d)
	root := t.TempDir()
	mountFiles(t, o, d, c, root)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		a = strings.ReplaceAll(a, "=/etc/sluice/", "="+root+"/etc/sluice/")
		if name, addr, ok := strings.Cut(a, "=:"); ok {
			a = name + "=127.0.0.1:" + addr
		}
		args[i] = a
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	probe := func(p *corev1.Probe) string {
		return fmt.Sprintf("http://127.0.0.1:%d%s", port(c, p.HTTPGet.Port.String()), p.HTTPGet.Path)
	}
	ready := probe(c.ReadinessProbe)
	if err := waitOK(ready, exited); err != nil {
		t.Fatalf("readiness %s: %v\n%s", ready, err, logs.String())
	}
	if code, body := get(t, probe(c.LivenessProbe)); code != http.StatusOK {
		t.Errorf("liveness %s: %d %s", probe(c.LivenessProbe), code, body)
	}

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port(c, "resp")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"PING"}, "-NOAUTH Authentication required."},
		{[]string{"AUTH", "client-Pw1"}, "+OK"},
		// The default policy of values.yaml: limit 100.
		{[]string{"RL.TAKE", "user:42"}, "[:1 :100 :99"},
		{[]string{"AUTH", "admin", "admin-Pw2"}, "+OK"},
	} {
		if got := roundTrip(t, conn, r, step.cmd...); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q: %s, want %s…", step.cmd, got, step.want)
		}
	}
	for _, door := range []string{"http", "grpc"} {
		dc, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port(c, door)))
		if err != nil {
			t.Errorf("door %s: %v", door, err)
			continue
		}
		dc.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("sluice after SIGTERM: %v\n%s", err, logs.String())
	}
	exited <- nil // for the cleanup
	for _, leak := range []string{"client-Pw1", "admin-Pw2"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("the log shows the password %s", leak)
		}
	}
}

// mountFiles lays out under root what the pod's volumes mount: each
// ConfigMap or Secret item at its mount path, as the kubelet's atomic
// writer does.
func mountFiles(t *testing.T, o *objects, d *appsv1.Deployment, c *corev1.Container, root string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		v := volume(d, m.Name)
		if v == nil {
			t.Fatalf("mount %s: no volume", m.Name)
		}
		files := map[string][]byte{}
		switch {
		case v.ConfigMap != nil:
			cm := o.configMaps[v.ConfigMap.Name]
			for _, it := range v.ConfigMap.Items {
				files[it.Path] = []byte(cm.Data[it.Key])
			}
		case v.Secret != nil:
			s := o.secrets[v.Secret.SecretName]
			for _, it := range v.Secret.Items {
				files[it.Path] = s.Data[it.Key]
			}
		default:
			t.Fatalf("volume %s: neither a ConfigMap nor a Secret", m.Name)
		}
		// The kubelet's layout: the files in a timestamped directory,
		// ..data a symlink to it, each file a symlink through ..data.
		dir := filepath.Join(root, m.MountPath)
		const stamp = "..2026_01_01_00_00_00.000000001"
		if err := os.MkdirAll(filepath.Join(dir, stamp), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(stamp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, stamp, name), b, 0o400); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// freePorts are n TCP ports of 127.0.0.1 free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// waitOK polls url until it answers 200; it gives up on an answer other
// than 503 (not ready), on the process's exit, or after a minute (a bound
// on a broken start, not a measure).
func waitOK(url string, exited chan error) error {
	deadline := time.Now().Add(time.Minute)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("sluice exited: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				return nil
			case http.StatusServiceUnavailable: // not ready yet: the store
			default:
				return fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond) // the poll's interval
	}
	return fmt.Errorf("not ready within a minute: %s", last)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	return resp.StatusCode, strings.TrimSpace(body.String())
}

// roundTrip sends one command in RESP and returns its reply, flattened:
// "+OK", "-ERR …", ":1", a bulk string's text, "[a b …]" for an array.
func roundTrip(t *testing.T, conn net.Conn, r *bufio.Reader, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	reply, err := readReply(r)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return reply
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("an empty reply line")
	}
	switch line[0] {
	case '+', '-', ':':
		return line, nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return line, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		items := make([]string, 0, max(n, 0))
		for range n {
			it, err := readReply(r)
			if err != nil {
				return "", err
			}
			items = append(items, it)
		}
		return "[" + strings.Join(items, " ") + "]", nil
	}
	return "", fmt.Errorf("a reply of unknown type: %q", line)
}
