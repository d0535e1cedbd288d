#!/usr/bin/env python3
"""TCP workloads with exact byte counts for the flow tests. Joins a cgroup first (CGDIR "-":
stays where it was started).

  flowwork.py CGDIR server HOST PORT REPLY      accept forever; read each connection to EOF,
                                               then send REPLY bytes and close
  flowwork.py CGDIR splicesrv HOST PORT REPLY   the same, but reads with splice() only
                                               (into a pipe, on to /dev/null)
  flowwork.py CGDIR splicen HOST PORT N        accept one connection, splice N bytes of it,
                                               close it first, print "closed"
  flowwork.py CGDIR partsrv HOST PORT READ     accept one connection, read READ bytes of it,
                                               print "read"; at a line on stdin close it
                                               (unread bytes left: a reset), print "closed"
  flowwork.py CGDIR mptcp-server ..., mptcp-client ...
                                               server and client over MPTCP sockets
  flowwork.py CGDIR tfo-server ..., tfo-client ...
                                               with TCP Fast Open: the listener allows it,
                                               the client's first send goes in its SYN
  flowwork.py CGDIR client HOST PORT N SIZE [tcpinfo]
                                               N connections: send SIZE bytes, half-close,
                                               read the reply to EOF, close; with tcpinfo,
                                               print the segments TCP_INFO counted in all
  flowwork.py CGDIR hold HOST PORT              one connection driven by stdin lines:
                                               "send N", "close" (prints "done" after each)
  flowwork.py CGDIR udpserver HOST PORT REPLY   for each datagram received (recvfrom), send
                                               REPLY bytes back to its sender (sendto)
  flowwork.py CGDIR udpclient HOST PORT N SIZE  an unconnected socket: N times send SIZE bytes
                                               (sendto), then receive the reply (recvfrom)
  flowwork.py CGDIR udpsink HOST PORT N         read N datagrams with recv(), which does not
                                               ask for their source; print "got BYTES"
  flowwork.py CGDIR udpsend HOST PORT N SIZE    an unconnected socket: N times send SIZE bytes
                                               (sendto), no reply awaited
  flowwork.py CGDIR udpmmsg HOST PORT N SIZE PORT2  an unconnected IPv4 socket: N sendmmsg()
                                               calls, each of two messages: SIZE bytes to
                                               PORT, then 2 x SIZE bytes to PORT2
  flowwork.py CGDIR udpask HOST PORT N SIZE     N sockets, one after the other: send SIZE bytes
                                               (sendto), read the reply with recv(), close
  flowwork.py CGDIR mix A/P/N/SIZE,... -        as client to each ADDR/PORT in turn
  flowwork.py CGDIR unixserver PATH - REPLY     as server, over a unix stream socket at PATH
  flowwork.py CGDIR unixclient PATH - N SIZE    as client, over a unix stream socket
"""
import ctypes
import os
import socket
import struct
import sys


def join(cgdir):
    if cgdir == "-":
        return
    with open(f"{cgdir}/cgroup.procs", "w") as f:
        f.write("0")


PROTO = 0  # IPPROTO_MPTCP for the mptcp- modes
TFO = False  # the tfo- modes


def connect(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    c = socket.socket(family, socket.SOCK_STREAM, PROTO)
    if not TFO:
        c.connect((host, port))
    return c


def serve(srv, reply):
    """Accept forever: read each connection to EOF, send reply bytes, close."""
    print("listening", flush=True)
    while True:
        c, _ = srv.accept()
        drain(c)
        c.sendall(b"r" * reply)
        c.close()


def splice_out(c, most=None):
    """Reads c with splice() only (into a pipe, on to /dev/null): to EOF, or most bytes."""
    r, w = os.pipe()
    sink = os.open(os.devnull, os.O_WRONLY)
    while (n := os.splice(c.fileno(), w, most or 65536)):
        most = most and most - n
        while n:
            n -= os.splice(r, sink, n)
        if most == 0:
            break
    for fd in (r, w, sink):
        os.close(fd)


def serve_splice(srv, reply):
    """serve(), reading each connection with splice() into a pipe, never with recv()."""
    print("listening", flush=True)
    while True:
        c, _ = srv.accept()
        splice_out(c)
        if reply:
            c.sendall(b"r" * reply)
        c.close()


def accept_one(family, host, port):
    """One connection of a listener on host:port (printing "listening" when it listens)."""
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.bind((host, port))
    srv.listen(1)
    print("listening", flush=True)
    return srv.accept()[0]


def exchange(c, size, addr=None):
    """Send size bytes, half-close, read the reply to EOF; the socket stays open. With addr
    (TCP Fast Open): connect with the first bytes, in the SYN."""
    if addr:
        size -= c.sendto(b"s" * size, socket.MSG_FASTOPEN, addr)
    c.sendall(b"s" * size)
    c.shutdown(socket.SHUT_WR)
    drain(c)


def drain(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            return n
        n += len(b)


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(Iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", Msghdr), ("len", ctypes.c_uint)]


def sendmmsg(s, messages):
    """One sendmmsg(2) of (payload, (host, port)) messages (Python's socket has none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    keep, vec = [], (Mmsghdr * len(messages))()
    for i, (data, (host, port)) in enumerate(messages):
        name = struct.pack("=H", socket.AF_INET) + struct.pack(">H", port) + \
            socket.inet_aton(host) + bytes(8)
        iov = Iovec(data, len(data))
        keep += [name, iov]
        vec[i].hdr = Msghdr(name, len(name), ctypes.pointer(iov), 1, None, 0, 0)
    sent = libc.sendmmsg(s.fileno(), vec, len(messages), 0)
    if sent != len(messages):
        raise OSError(ctypes.get_errno(), f"sendmmsg sent {sent} of {len(messages)}")


def main():
    global PROTO, TFO
    cgdir, mode, host = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode.startswith("mptcp-"):
        mode, PROTO = mode[len("mptcp-"):], socket.IPPROTO_MPTCP
    if mode.startswith("tfo-"):
        mode, TFO = mode[len("tfo-"):], True
    port = 0 if sys.argv[4] == "-" else int(sys.argv[4])
    join(cgdir)
    family = socket.AF_INET6 if ":" in host and "/" not in host else socket.AF_INET
    if mode == "udpserver":
        reply = int(sys.argv[5])
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind((host, port))
        print("listening", flush=True)
        while True:
            _, peer = s.recvfrom(65536)
            s.sendto(b"r" * reply, peer)
    elif mode == "udpsink":
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind((host, port))
        print("listening", flush=True)
        got = sum(len(s.recv(65536)) for _ in range(int(sys.argv[5])))
        print(f"got {got}", flush=True)
        sys.stdin.read()  # the socket stays open until the test ends
    elif mode == "udpsend":
        n, size = int(sys.argv[5]), int(sys.argv[6])
        s = socket.socket(family, socket.SOCK_DGRAM)
        for _ in range(n):
            s.sendto(b"s" * size, (host, port))
        print("done", flush=True)
    elif mode == "udpmmsg":
        n, size, port2 = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(n):
            sendmmsg(s, [(b"s" * size, (host, port)), (b"t" * 2 * size, (host, port2))])
        print("done", flush=True)
    elif mode == "udpask":
        n, size = int(sys.argv[5]), int(sys.argv[6])
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_DGRAM)
            s.sendto(b"s" * size, (host, port))
            s.recv(65536)
            s.close()
        print("done", flush=True)
    elif mode == "udpclient":
        n, size = int(sys.argv[5]), int(sys.argv[6])
        s = socket.socket(family, socket.SOCK_DGRAM)
        for _ in range(n):
            s.sendto(b"s" * size, (host, port))
            s.recvfrom(65536)
        print("done", flush=True)
    elif mode == "mix":  # HOST is a list: ADDR/PORT/N/SIZE,...: client of each in turn
        for target in host.split(","):
            addr, tport, n, size = target.split("/")
            for _ in range(int(n)):
                c = connect(addr, int(tport))
                exchange(c, int(size))
                c.close()
        print("done", flush=True)
    elif mode == "unixserver":
        reply = int(sys.argv[5])
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(host)
        srv.listen(128)
        serve(srv, reply)
    elif mode == "unixclient":
        n, size = int(sys.argv[5]), int(sys.argv[6])
        for _ in range(n):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(host)
            exchange(c, size)
            c.close()
        print("done", flush=True)
    elif mode in ("server", "splicesrv"):
        reply = int(sys.argv[5])
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        srv = socket.socket(family, socket.SOCK_STREAM, PROTO)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if TFO:
            srv.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 64)
        srv.bind((host, port))
        srv.listen(1024)
        (serve if mode == "server" else serve_splice)(srv, reply)
    elif mode == "splicen":
        c = accept_one(family, host, port)
        splice_out(c, int(sys.argv[5]))
        c.close()
        print("closed", flush=True)
        sys.stdin.read()
    elif mode == "partsrv":
        c = accept_one(family, host, port)
        want = int(sys.argv[5])
        while want:
            want -= len(c.recv(want))
        print("read", flush=True)
        sys.stdin.readline()
        c.close()
        print("closed", flush=True)
        sys.stdin.read()
    elif mode == "client":
        n, size = int(sys.argv[5]), int(sys.argv[6])
        tcpinfo = len(sys.argv) > 7 and sys.argv[7] == "tcpinfo"
        segs = [0, 0]
        for _ in range(n):
            c = connect(host, port)
            exchange(c, size, (host, port) if TFO else None)
            if tcpinfo:  # final: the peer's FIN is in and acked, close() sends nothing more
                info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
                segs[0] += int.from_bytes(info[136:140], "little")  # tcpi_segs_out
                segs[1] += int.from_bytes(info[140:144], "little")  # tcpi_segs_in
            c.close()
        print("done" + (f" {segs[0]} {segs[1]}" if tcpinfo else ""), flush=True)
    elif mode == "hold":
        c = connect(host, port)
        print("connected", flush=True)
        for line in sys.stdin:
            words = line.split()
            if words[0] == "send":
                c.sendall(b"h" * int(words[1]))
            elif words[0] == "close":
                c.shutdown(socket.SHUT_WR)
                drain(c)
                c.close()
            print("done", flush=True)


if __name__ == "__main__":
    main()
