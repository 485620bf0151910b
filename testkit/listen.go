package testkit

import (
	"bufio"
	bin "encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// exposedListeners returns the TCP sockets listening on port on an address
// other than loopback (0.0.0.0, ::, a LAN address), read from Linux's
// /proc/net/tcp and /proc/net/tcp6. The servers of scripts/services.sh and
// the throwaway ones started here must listen on 127.0.0.1 only.
func exposedListeners(port int) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	found := false
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		socks, err := listeners(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return nil, err
		}
		found = true
		for _, ap := range socks {
			if int(ap.Port()) == port && !ap.Addr().Unmap().IsLoopback() {
				out = append(out, ap)
			}
		}
	}
	if !found {
		return nil, errors.New("no /proc/net/tcp: cannot list listening sockets (not Linux?)")
	}
	return out, nil
}

// listeners parses the LISTEN sockets of one /proc/net/tcp{,6} file.
func listeners(file string) ([]netip.AddrPort, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []netip.AddrPort
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		ap, err := procAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", file, fields[1], err)
		}
		out = append(out, ap)
	}
	return out, sc.Err()
}

// procAddr decodes "0100007F:1F90": the address as 32-bit words in host
// byte order (little-endian here), the port big-endian hex.
func procAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, errors.New("no port")
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, errors.New("bad address")
	}
	for i := 0; i < len(raw); i += 4 {
		bin.BigEndian.PutUint32(raw[i:], bin.LittleEndian.Uint32(raw[i:]))
	}
	ip, _ := netip.AddrFromSlice(raw)
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}
