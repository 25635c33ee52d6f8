package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/tidwall/redcon"
)

// FuzzRESP feeds arbitrary client bytes through the same path as a
// connection: the guard's reader and the command layer (with a fake
// Decider). It checks that
//
//   - nothing panics (a recovered handler panic counts as one),
//   - the guard frames and splits requests exactly as redcon's reader
//     does: the commands it returns are those redcon reads alone from the
//     bytes up to the end of the last of them, redcon finds no error in
//     those bytes, and the guard reads every byte unless it reports a
//     violation (or QUIT ran),
//   - every byte written back is well-formed RESP: one reply per command
//     executed, then at most the guard's error line.
//
// The first argument picks the read size (0: whole reads) and, by its high
// bit, a server that requires a password.
func FuzzRESP(f *testing.F) {
	for _, seed := range []string{
		"PING\r\n",
		"*2\r\n$7\r\nRL.TAKE\r\n$1\r\nk\r\n",
		"*3\r\n$7\r\nRL.PEEK\r\n$1\r\nk\r\n$2\r\n10\r\n",
		"RL.TAKE k 1\r\nRL.RESET k\r\nRL.TAKE k\r\nQUIT\r\nPING\r\n",
		"HELLO 3\r\nHELLO 2 AUTH default pw SETNAME x\r\nCLIENT SETINFO LIB-NAME go-redis\r\n",
		"AUTH pw\r\nCOMMAND DOCS\r\nCOMMAND INFO rl.take nosuch\r\nCONFIG GET *\r\nINFO\r\n",
		"*1\r\n$999999999\r\n",
		"*0\r\n",
		"ECHO \"a b\" 'c'\r\n",
		"RL.TAKE panic\r\nRL.TAKE nopolicy:\x00\r\n",
		"RL.MTAKE a 1 b 2\r\nRL.MTAKE a 1 nopolicy 1\r\nRL.MTAKE a\r\n*3\r\n$8\r\nRL.MTAKE\r\n$1\r\nk\r\n$2\r\n-1\r\n",
		"CL.THROTTLE u 15 30 60\r\nCL.THROTTLE u 15 30 60 0\r\nCL.THROTTLE u -1 1 1\r\nCL.THROTTLE u 5000 1 1\r\n",
		"RL.POLICY LIST\r\nRL.POLICY GET x\r\nRL.POLICY SET x {}\r\nRL.POLICY\r\n",
	} {
		f.Add(uint8(0), []byte(seed))
		f.Add(uint8(0x81), []byte(seed))
	}
	fake := newFake(5)
	open, err := New(Config{Decider: fake, MaxRequestBytes: 256, MaxKeyBytes: 16})
	if err != nil {
		f.Fatal(err)
	}
	locked, err := New(Config{Decider: fake, MaxRequestBytes: 256, MaxKeyBytes: 16, RequirePass: "pw"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		fake.forget()
		srv := open
		if mode&0x80 != 0 {
			srv = locked
		}
		chunk := int(mode & 0x7f)

		var out bytes.Buffer
		rng := rand.New(rand.NewPCG(uint64(len(data)), uint64(mode)))
		read := &countingReader{r: &chunkReader{src: data, limit: chunk, rng: rng}}
		guard := &conn{
			Conn: readerConn{r: read, out: &out},
			srv:  srv,
			sc:   scanner{max: srv.cfg.MaxRequestBytes},
		}
		c := srv.newConnState(&out, "fuzz", "fuzz")
		var got [][][]byte
		replies, done := 0, 0 // done: bytes up to the end of the last command returned
		var readErr error
		for !c.quit {
			cmds, err := guard.readPipeline()
			if err != nil {
				readErr = err
				break
			}
			done = read.n - (guard.end - guard.last)
			for _, args := range cmds {
				// Copies: the views are valid only until the next read.
				cp := make([][]byte, len(args))
				for i, a := range args {
					cp[i] = slices.Clone(a)
				}
				got = append(got, cp)
			}
			replies += c.exec(cmds)
			c.flush()
			if c.werr != nil {
				t.Fatal(c.werr)
			}
		}

		// The reference is redcon alone on the bytes up to the last command
		// returned (not on all of data: redcon alone hangs on some inputs
		// the guard rejects, such as "*9000000000000000000\r\n"). It reads
		// byte by byte, since redcon drops the commands that share a read
		// with a malformed one.
		want, err := readAll(redcon.NewReader(iotest.OneByteReader(bytes.NewReader(data[:done]))))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("redcon alone fails on bytes the guard accepted: %v\nguarded %q", err, got)
		}
		if !slices.EqualFunc(got, argsOf(want), func(a, b [][]byte) bool { return slices.EqualFunc(a, b, bytes.Equal) }) {
			t.Fatalf("the guard read other commands than redcon:\nguarded %q\nalone   %q", got, argsOf(want))
		}
		var v violation
		if !c.quit && errors.Is(readErr, io.EOF) && read.n != len(data) {
			t.Fatalf("the guard read %d of %d bytes without a violation", read.n, len(data))
		}

		br := bufio.NewReader(&out)
		for i := range replies {
			if _, err := readRESP(br); err != nil {
				t.Fatalf("reply %d of %d is not RESP: %v\nall output: %q", i+1, replies, err, out.String())
			}
		}
		if errors.As(readErr, &v) {
			if line, err := readRESP(br); err != nil || line != "-"+string(v) {
				t.Fatalf("violation %q written as %q, %v", v, line, err)
			}
		}
		if rest, _ := io.ReadAll(br); len(rest) > 0 {
			t.Fatalf("%d bytes after the replies: %q", len(rest), rest)
		}
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// readAll reads every command redcon frames from rd.
func readAll(rd *redcon.Reader) ([]redcon.Command, error) {
	var all []redcon.Command
	for {
		cmds, err := rd.ReadCommands()
		if err != nil {
			return all, err
		}
		all = append(all, cmds...)
	}
}

func argsOf(cmds []redcon.Command) [][][]byte {
	out := make([][][]byte, len(cmds))
	for i, c := range cmds {
		out[i] = c.Args
	}
	return out
}
