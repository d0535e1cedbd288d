#!/usr/bin/env python3
"""plumb agent --web-config (issue 7 §1): TLS with a certificate the test makes (openssl),
basic auth with a bcrypt hash the test makes (libcrypt, through Python's crypt), the minimum
TLS version, the warning for plain HTTP on a non-loopback address, and bad configurations
(one line, exit 1, before any BPF is loaded); slow clients."""
# plumb-module: io

import base64
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import (EMULATED, PLUMB, Cleanup, Runner, free_port, read_log, require_root,  # noqa: E402
                 sh)

USER_SPACE = "TLS, basic auth and the HTTP server are user space: the same on every kernel"

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # libcrypt's bcrypt; deprecated in 3.11, present in Debian 12's 3.11


def bcrypt(password):
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))


class Files:
    """A certificate and key for 127.0.0.1, a second unrelated key, and web configs."""

    def __init__(self, cleanup):
        self.dir = tempfile.mkdtemp(prefix="plumb-web-")
        cleanup.add(sh, "rm", "-rf", self.dir)
        self.cert, self.key = self.path("server.crt"), self.path("server.key")
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", self.key, "-out", self.cert, "-days", "1", "-subj",
           "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
        self.other_key = self.path("other.key")
        sh("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-out", self.other_key)

    def path(self, name):
        return os.path.join(self.dir, name)

    def config(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)


def start(cleanup, *args):
    """An agent (io module only); returns (proc, port, output file) once it serves, or once
    it has exited."""
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([PLUMB, "agent", "--modules", "io", *args] +
                         ([] if any(a.startswith("--listen") for a in args)
                          else ["--listen", f"127.0.0.1:{port}"]),
                         stdout=log, stderr=subprocess.STDOUT)
    cleanup.add(lambda: p.poll() is None and (p.terminate(), p.wait()))
    deadline = time.time() + 20
    while time.time() < deadline and p.poll() is None:
        if "serving metrics at" in read_log(log):
            break
        time.sleep(0.1)
    return p, port, read_log(log)


def get(port, path, user=None, password=None, context=None, cafile=None):
    """(status, headers) of GET path over TLS (context, or one trusting cafile)."""
    import http.client
    ctx = context or ssl.create_default_context(cafile=cafile)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            f"{user}:{password}".encode()).decode()
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.headers, body


def test_tls_and_auth(cleanup, files):
    hash_ = bcrypt("s3cret")
    cfg = files.config("web.yml", "tls_server_config:\n  cert_file: server.crt\n"
                       f"  key_file: server.key\nbasic_auth_users:\n  alice: {hash_}\n")
    p, port, out = start(cleanup, "--web-config", cfg)
    assert p.poll() is None, out
    assert f"serving metrics at https://127.0.0.1:{port}/metrics" in out, out
    status, _, body = get(port, "/metrics", "alice", "s3cret", cafile=files.cert)
    assert status == 200 and "plumb_build_info" in body, (status, body[:200])
    # the cached verification: a second request the same
    assert get(port, "/metrics", "alice", "s3cret", cafile=files.cert)[0] == 200
    for user, password in (("alice", "wrong"), ("bob", "s3cret"), (None, None),
                           ("alice", "")):
        for path in ("/metrics", "/healthz"):
            status, headers, _ = get(port, path, user, password, cafile=files.cert)
            assert status == 401, (user, password, path, status)
            assert headers.get("WWW-Authenticate", "").startswith('Basic realm="plumb"'), \
                headers
    # a right password after a wrong one still passes (the cache holds only right ones)
    assert get(port, "/healthz", "alice", "s3cret", cafile=files.cert)[0] == 200
    # TLS 1.2 is accepted by default
    ctx = ssl.create_default_context(cafile=files.cert)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    assert get(port, "/healthz", "alice", "s3cret", context=ctx)[0] == 200
    # plain HTTP on the TLS port gets no page
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        reply = s.recv(4096)
    assert not reply.startswith(b"HTTP/1."), reply[:100]
    # a client that does not trust the certificate refuses it
    try:
        get(port, "/healthz", "alice", "s3cret", context=ssl.create_default_context())
        raise AssertionError("an untrusted certificate was accepted")
    except ssl.SSLCertVerificationError:
        pass


def test_min_version(cleanup, files):
    cfg = files.config("tls13.yml", f"tls_server_config:\n  cert_file: {files.cert}\n"
                       f"  key_file: {files.key}\n  min_version: TLS13\n")
    p, port, out = start(cleanup, "--web-config", cfg)
    assert p.poll() is None, out
    assert get(port, "/healthz", cafile=files.cert)[0] == 200  # no users: no auth
    ctx = ssl.create_default_context(cafile=files.cert)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        get(port, "/healthz", context=ctx)
        raise AssertionError("a TLS 1.2 client was served under min_version TLS13")
    except (ssl.SSLError, ConnectionResetError):
        pass


def test_plain_warning(cleanup, files):
    """Plain HTTP on a non-loopback address warns; with TLS, or on loopback, it does not."""
    port = free_port()
    p, _, out = start(cleanup, "--listen", f"0.0.0.0:{port}")
    assert p.poll() is None, out
    assert "listening on 0.0.0.0 without TLS" in out, out
    p.terminate()
    p.wait()
    cfg = files.config("tls.yml", f"tls_server_config:\n  cert_file: {files.cert}\n"
                       f"  key_file: {files.key}\n")
    port = free_port()
    p, _, out = start(cleanup, "--listen", f"0.0.0.0:{port}", "--web-config", cfg)
    assert p.poll() is None and "without TLS" not in out, out
    p.terminate()
    p.wait()
    p, _, out = start(cleanup)
    assert p.poll() is None and "without TLS" not in out, out


def test_bad_configs(cleanup, files):
    cases = [
        (files.path("missing.yml"), "No such file or directory"),
        (files.config("typo.yml", "tls_server_config:\n  cert_file: a\n  key_fil: b\n"),
         "line 3: tls_server_config.key_fil: unknown key"),
        (files.config("nokey.yml", f"tls_server_config:\n  cert_file: {files.cert}\n"
                      f"  key_file: {files.path('absent.key')}\n"),
         "key_file " + files.path("absent.key") + ": No such file or directory"),
        (files.config("notpem.yml", f"tls_server_config:\n  cert_file: {cfg_path(files)}\n"
                      f"  key_file: {files.key}\n"), "not a PEM file"),
        (files.config("mismatch.yml", f"tls_server_config:\n  cert_file: {files.cert}\n"
                      f"  key_file: {files.other_key}\n"), "The certificate and the given key do not match"),
        (files.config("plain.yml", "basic_auth_users:\n  alice: hunter2\n"),
         "user 'alice': not a bcrypt hash"),
    ]
    for path, want in cases:
        p, _, out = start(cleanup, "--web-config", path)
        p.wait(20)
        lines = [x for x in out.splitlines() if x.strip()]
        assert p.returncode == 1 and want in out and len(lines) == 1, \
            (path, p.returncode, out)
        assert "--web-config" in lines[0] and "module" not in out, out  # before any BPF


def test_slow_clients(cleanup, files):
    """Slowloris: 64 connections from four other loopback addresses (16 each, the most one
    address may hold) that send a request head a byte at a time, one byte a second. A scrape
    is answered while they hang on, and each of them is closed within the head deadline
    (3 s) and a sweep, not at MHD's idle timeout (never: they are not idle). An oversized
    head gets 431 and does not hold its connection either."""
    import http.client
    p, port, out = start(cleanup)
    assert p.poll() is None, out
    slow = []
    for a in range(2, 6):
        for _ in range(16):
            s = socket.socket()
            s.bind((f"127.0.0.{a}", 0))
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            slow.append(s)
    cleanup.add(lambda: [s.close() for s in slow])
    head, t0, closed = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 20, \
        time.time(), {}
    scraped = None
    for i in range(len(head)):
        for k, s in enumerate(slow):
            if k in closed:
                continue
            try:
                s.send(head[i:i + 1])
                if s.recv(1) == b"":
                    closed[k] = time.time() - t0
            except BlockingIOError:
                pass
            except OSError:
                closed[k] = time.time() - t0
        if scraped is None and i == 1:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/metrics")
            r = c.getresponse()
            scraped = (r.status, "plumb_build_info" in r.read().decode(), time.time() - t0)
            c.close()
        if len(closed) == len(slow):
            break
        time.sleep(1)
    print(f"  scrape during the attack: {scraped}; {len(closed)} of {len(slow)} slow "
          f"connections closed, the last after {max(closed.values(), default=0):.1f} s")
    assert scraped and scraped[0] == 200 and scraped[1], scraped
    # the deadline and a sweep, and this loop's round of 64 sends (slow under emulation)
    assert len(closed) == len(slow) and max(closed.values()) < (20 if EMULATED else 6), closed
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics", headers={"X-Big": "b" * 40000})
    assert c.getresponse().status == 431
    c.close()


def cfg_path(files):
    return files.config("some.txt", "not a certificate\n")


def main():
    require_root()
    runner = Runner()
    cleanup = Cleanup()
    try:
        files = None if EMULATED else Files(cleanup)
        for name, fn in (("web config: TLS and basic auth (bcrypt)", test_tls_and_auth),
                         ("web config: min_version TLS13 refuses TLS 1.2", test_min_version),
                         ("web config: plain HTTP off loopback warns", test_plain_warning),
                         ("web config: bad files, one line, exit 1", test_bad_configs),
                         ("http: slow clients cannot hold the server", test_slow_clients)):
            runner.run_host(USER_SPACE, name, fn, cleanup, files)
    finally:
        cleanup.run()
    return runner.finish()


if __name__ == "__main__":
    sys.exit(main())
