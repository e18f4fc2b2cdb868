package preview

import (
	"slices"
	"strings"
	"testing"
)

const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41235 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 41236 1 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41237 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1388 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41238 1 0000000000000000 100 0 0 10 0
`

func TestListeningPorts(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []int
	}{
		{name: "IPv4 and IPv6, one port on both listed once; an established socket is not", text: procNetTCP, want: []int{3000, 5000, 8080}},
		{name: "headers only", text: "  sl  local_address rem_address   st\n", want: []int{}},
		{name: "empty", text: "", want: []int{}},
		{name: "port 0 and bad fields are skipped", text: "0: 00000000:0000 00000000:0000 0A\n1: 0000000:0050 00000000:0000 0A\n2: 00000000:ZZZZ 0 0A\n3: 0000000G:0050 0 0A\n4: 00000000:0050 0 0A\n", want: []int{80}},
		{name: "no trailing newline", text: "0: 00000000:1F90 00000000:0000 0A", want: []int{8080}},
		{name: "a line without its sl colon", text: "0 00000000:1F90 00000000:0000 0A\n", want: []int{}},
	} {
		if got := ListeningPorts([]byte(tc.text)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListeningPorts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func FuzzListeningPorts(f *testing.F) {
	f.Add([]byte(procNetTCP))
	f.Add([]byte("0: 00000000:FFFF 00000000:0000 0A\n"))
	f.Add([]byte(strings.Repeat("x: :: 0A\n", 3)))
	f.Fuzz(func(t *testing.T, text []byte) {
		ports := ListeningPorts(text)
		if ports == nil || !slices.IsSorted(ports) || len(slices.Compact(slices.Clone(ports))) != len(ports) {
			t.Fatalf("ports %v not a sorted set", ports)
		}
		for _, p := range ports {
			if p < 1 || p > 65535 {
				t.Fatalf("port %d out of range", p)
			}
		}
	})
}
