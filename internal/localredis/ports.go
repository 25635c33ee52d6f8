package localredis

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// freePorts returns n client ports p such that p and p+10000 can both be
// bound on 127.0.0.1 right now.
//
// Candidates come from below the kernel's ephemeral range, so that neither a
// client port nor a bus port is handed out meanwhile as the local port of
// some outgoing connection (with 6 nodes gossiping, that race is real). The
// check holds every listener open until all ports are chosen, so the n pairs
// are distinct. Another process may still take a port before redis-server
// binds it; Start retries on that.
func freePorts(n int) ([]int, error) {
	lo, hi := candidateRange()
	var (
		ports []int
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 200*n {
			return nil, fmt.Errorf("%w: found only %d of %d free port pairs (p, p+%d)", ErrPortInUse, len(ports), n, busPortOffset)
		}
		var (
			p     int
			first net.Listener
			err   error
		)
		if hi > lo {
			p = lo + rand.IntN(hi-lo)
			if first, err = listen(p); err != nil {
				continue
			}
		} else {
			// No room below the ephemeral range: let the kernel choose.
			if first, err = listen(0); err != nil {
				return nil, fmt.Errorf("localredis: listen on 127.0.0.1:0: %w", err)
			}
			p = first.Addr().(*net.TCPAddr).Port
			if p+busPortOffset > 65535 {
				first.Close()
				continue
			}
		}
		bus, err := listen(p + busPortOffset)
		if err != nil {
			first.Close()
			continue
		}
		held = append(held, first, bus)
		ports = append(ports, p)
	}
	return ports, nil
}

// checkPorts reports whether the fixed ports first … first+n-1 and their bus
// ports are free.
func checkPorts(first, n int) ([]int, error) {
	ports := make([]int, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := range ports {
		p := first + i
		for _, q := range []int{p, p + busPortOffset} {
			l, err := listen(q)
			if err != nil {
				return nil, fmt.Errorf("%w: 127.0.0.1:%d: %v", ErrPortInUse, q, err)
			}
			held = append(held, l)
		}
		ports[i] = p
	}
	return ports, nil
}

func listen(port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// candidateRange is [lo, hi) for client ports: at least 10000, so that the
// usual fixed ports (6379, 7000…) stay clear, and with the bus port still
// below the ephemeral range.
func candidateRange() (lo, hi int) {
	ephemeralLow := 32768 // Linux default; also below the BSD/IANA 49152
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				ephemeralLow = v
			}
		}
	}
	return 10000, ephemeralLow - busPortOffset
}

// ports are n client ports for new servers: free ones at random, or
// Port, Port+1, … checked to be free.
func (s *settings) ports(n int) ([]int, error) {
	if s.Port == 0 {
		return freePorts(n)
	}
	return checkPorts(s.Port, n)
}
