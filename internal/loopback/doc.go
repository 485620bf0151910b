// Package loopback finds TCP ports on 127.0.0.1 for servers and proxies
// that must keep their port across a restart: ports below the kernel's
// ephemeral range, which an outgoing connection can never be given while
// the port is closed between a stop and a start.
package loopback
