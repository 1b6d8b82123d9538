package nsinit

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cordon-sandbox/cordon/internal/sandbox/wire"
)

// Tags of the descriptors init passes to cordon's proxy.
const (
	tagProxy       = wire.TagProxy
	tagTransparent = wire.TagTransparent
	tagDNS         = wire.TagDNS
)

// transparent captures, inside the sandbox's network namespace, what clients
// that ignore the proxy variables send: every TCP connection to an address
// outside 127.0.0.0/8 is routed to lo and redirected (nftables, nat output)
// to a listener whose connections cordon's proxy receives with their
// original destination; DNS queries to 127.0.0.53 reach cordon's resolver.
func transparent(spec *wire.Spec, sock *os.File) error {
	if err := defaultRouteViaLo(); err != nil {
		return fmt.Errorf("routing through lo: %w", err)
	}
	if err := redirectTCP(wire.TransparentPort); err != nil {
		return fmt.Errorf("redirecting TCP: %w", err)
	}
	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", wire.TransparentPort))
	if err != nil {
		return err
	}
	go relay(ln, sock, tagTransparent)
	dns, err := net.ListenPacket("udp4", wire.DNSAddr)
	if err != nil {
		return fmt.Errorf("listening for DNS: %w", err)
	}
	f, err := dns.(*net.UDPConn).File()
	dns.Close()
	if err != nil {
		return err
	}
	defer f.Close()
	return wire.SendFDTag(sock, f, tagDNS)
}

// relay hands every accepted connection to cordon, tagged.
func relay(ln net.Listener, sock *os.File, tag byte) {
	defer ln.Close()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f, err := c.(*net.TCPConn).File()
		c.Close()
		if err != nil {
			continue
		}
		err = wire.SendFDTag(sock, f, tag)
		f.Close()
		if err != nil {
			return // cordon is gone
		}
	}
}

// redirectTCP adds, in this network namespace, a nat output rule that sends
// every TCP connection to an address outside 127.0.0.0/8 to port.
func redirectTCP(port uint16) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "cordon"})
	chain := c.AddChain(&nftables.Chain{
		Name:     "capture",
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityNATDest,
	})
	// Replies are translated back by the NAT core at the input hook, which
	// needs a nat chain registered there, even an empty one.
	c.AddChain(&nftables.Chain{
		Name:     "replies",
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookInput,
		Priority: nftables.ChainPriorityNATSource,
	})
	c.AddRule(&nftables.Rule{
		Table: table,
		Chain: chain,
		Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			// ip daddr & 255.0.0.0 != 127.0.0.0
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127, 0, 0, 0}},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Redir{RegisterProtoMin: 1},
		},
	})
	return c.Flush()
}

// defaultRouteViaLo adds "default dev lo": without a route, connecting to an
// outside address fails before the redirect can see it.
func defaultRouteViaLo() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	type request struct {
		hdr unix.NlMsghdr
		rt  unix.RtMsg
		oif struct {
			attr  unix.RtAttr
			index uint32
		}
		// The source of connections out: lo's address, or the kernel picks
		// 0.0.0.0, which no reply reaches.
		src struct {
			attr unix.RtAttr
			addr [4]byte
		}
	}
	var req request
	req.hdr.Len = uint32(unsafe.Sizeof(req))
	req.hdr.Type = unix.RTM_NEWROUTE
	req.hdr.Flags = unix.NLM_F_REQUEST | unix.NLM_F_CREATE | unix.NLM_F_EXCL | unix.NLM_F_ACK
	req.hdr.Seq = 1
	req.rt = unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_STATIC, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	req.oif.attr = unix.RtAttr{Len: uint16(unsafe.Sizeof(req.oif)), Type: unix.RTA_OIF}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	req.oif.index = uint32(lo.Index)
	req.src.attr = unix.RtAttr{Len: uint16(unsafe.Sizeof(req.src)), Type: unix.RTA_PREFSRC}
	req.src.addr = [4]byte{127, 0, 0, 1}
	b := (*[unsafe.Sizeof(req)]byte)(unsafe.Pointer(&req))[:]
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	ack := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, ack, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(ack[:n])
	if err != nil || len(msgs) == 0 {
		return fmt.Errorf("no answer from rtnetlink")
	}
	if msgs[0].Header.Type == unix.NLMSG_ERROR && len(msgs[0].Data) >= 4 {
		if errno := -int32(*(*int32)(unsafe.Pointer(&msgs[0].Data[0]))); errno != 0 {
			return unix.Errno(errno)
		}
	}
	return nil
}
