#!/usr/bin/env python3
"""oci_proxy.py: a loopback HTTP proxy in front of a registry that injects faults or demands auth (tests only).

usage: oci_proxy.py UPSTREAM_PORT MODE_FILE PORT_FILE [CERT KEY]
It listens on 127.0.0.1 (a free port, written to PORT_FILE; HTTPS with
CERT and KEY, its bearer challenge still naming an http:// realm) and forwards
every request to 127.0.0.1:UPSTREAM_PORT. The first line of MODE_FILE,
read per request, picks what it does to layer blobs (GET of a blob over
4 KiB, i.e. not a config):
  pass      forward unchanged
  corrupt   invert one byte in the middle
  corrupt_end  invert the 100th byte from the end
  truncate  announce and send only the first half (a clean but short answer)
  long      announce and send 64 KiB more than the blob (the descriptor's size is the limit)
  escape500 answer 500 to every layer GET, the error message carrying a terminal escape
  bigmanifest answer every manifest GET with a 5 MiB JSON document
  drop      announce the whole size, send half, then cut the connection
  fail500   answer 500 to the second layer GET and later ones
  missing   answer 404 to every layer GET
  slow      send layers in 64 KiB pieces, 50 ms apart
  trickle   send layers 2 bytes a second (until the client gives up)
  bearer    demand a bearer token (from /token, given for basic alice:secret)
  bearer-redirect  as bearer, and answer every blob GET with a 307 to a second
            listener on another port (a blob store) that serves it without
            auth and logs "GET PATH blobstore auth=yes|no" (did the client
            send it an Authorization header?)
  index     invert the last byte of every chunk index blob (STRCHK1 header)
  offline   close the connection, unanswered, on every blob GET
  delay N   wait N ms before answering each request (a slow link)
  referrers answer the referrers API (GET /v2/REPO/referrers/DIGEST) as a registry
            that has it would, from the tag schema's index (sha256-<hex>) upstream
Every request is logged to MODE_FILE.log as "METHOD PATH STATUS BYTES"
(and the Range asked for, if any).
"""
import base64
import http.client
import http.server
import os
import socket
import ssl
import sys
import threading
import time

UPSTREAM = int(sys.argv[1])
MODE_FILE = sys.argv[2]
PORT_FILE = sys.argv[3]
TOKEN = "tok-7f3a"
LOCK = threading.Lock()
STATE = {"layer_gets": 0}


def mode():
    try:
        with open(MODE_FILE) as f:
            return f.readline().strip() or "pass"
    except OSError:
        return "pass"


def delay():
    m = mode().split()
    if len(m) == 2 and m[0] == "delay":
        time.sleep(int(m[1]) / 1000.0)


def log(line):
    with LOCK, open(MODE_FILE + ".log", "a") as f:
        f.write(line + "\n")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_plain(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        log("%s %s %d %d" % (self.command, self.path, status, len(body)))

    def auth_ok(self):
        if mode() not in ("bearer", "bearer-redirect"):
            return True
        host = self.headers.get("Host", "127.0.0.1")
        if self.path.startswith("/token"):
            want = "Basic " + base64.b64encode(b"alice:secret").decode()
            if self.headers.get("Authorization") != want:
                self.send_plain(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
            else:
                self.send_plain(200, ('{"token":"%s"}' % TOKEN).encode(),
                                [("Content-Type", "application/json")])
            return False
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            chal = 'Bearer realm="http://%s/token",service="test-registry"' % host
            self.send_plain(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                            [("WWW-Authenticate", chal), ("Content-Type", "application/json")])
            return False
        return True

    def forward(self):
        delay()
        blob_get = self.command == "GET" and "/blobs/sha256:" in self.path
        if self.server.server_address[1] == STATE.get("blobstore_port"):
            log("%s %s blobstore auth=%s" % (self.command, self.path,
                                             "yes" if "Authorization" in self.headers else "no"))
        elif not self.auth_ok():
            return
        elif mode() == "bigmanifest" and self.command == "GET" and "/manifests/" in self.path:
            self.send_plain(200, b'{"pad":"' + b"x" * (5 << 20) + b'"}',
                            [("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
            return
        elif mode() == "bearer-redirect" and blob_get:
            self.send_plain(307, b"", [("Location", "http://127.0.0.1:%d%s" % (STATE["blobstore_port"], self.path))])
            return
        if mode() == "offline" and self.command == "GET" and "/blobs/sha256:" in self.path:
            log("%s %s offline 0" % (self.command, self.path))
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if mode() == "referrers" and self.command == "GET" and "/referrers/sha256:" in self.path:
            repo, rest = self.path[len("/v2/"):].split("/referrers/", 1)
            digest = rest.split("?", 1)[0]
            conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
            conn.request("GET", "/v2/%s/manifests/sha256-%s" % (repo, digest[len("sha256:"):]),
                         headers={"Accept": "application/vnd.oci.image.index.v1+json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                data = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}'
            self.send_plain(200, data, [("Content-Type", "application/vnd.oci.image.index.v1+json")])
            return
        body = None
        if "Content-Length" in self.headers:
            body = self.rfile.read(int(self.headers["Content-Length"]))
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("connection", "authorization", "content-length")}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read() if self.command != "HEAD" else b""
        m = mode()
        if m == "index" and self.command == "GET" and data.startswith(b"STRCHK1\n"):
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        is_layer = (self.command == "GET" and "/blobs/sha256:" in self.path and resp.status in (200, 206)
                    and len(data) > 4096)
        if is_layer:
            with LOCK:
                STATE["layer_gets"] += 1
                n = STATE["layer_gets"]
            if m == "corrupt":
                mid = len(data) // 2
                data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
            elif m == "corrupt_end":
                at = len(data) - 100
                data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
            elif m == "truncate":
                data = data[:len(data) // 2]
            elif m == "long":
                data = data + os.urandom(65536)
            elif m == "escape500":
                self.send_plain(500, b'{"errors":[{"code":"UNKNOWN","message":"\x1b[2Jwiped\x1b[31m"}]}')
                return
            elif m == "missing":
                self.send_plain(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                return
            elif m == "fail500" and n >= 2:
                self.send_plain(500, b'{"errors":[{"code":"UNKNOWN","message":"injected"}]}')
                return
            elif m == "slow":
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.end_headers()
                for i in range(0, len(data), 65536):
                    self.wfile.write(data[i:i + 65536])
                    self.wfile.flush()
                    time.sleep(0.05)
                log("%s %s slow %d" % (self.command, self.path, len(data)))
                return
            elif m == "trickle":
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.end_headers()
                sent = 0
                try:
                    for i in range(0, len(data), 2):
                        self.wfile.write(data[i:i + 2])
                        self.wfile.flush()
                        sent += 2
                        time.sleep(1)
                except OSError:
                    pass
                log("%s %s trickled %d" % (self.command, self.path, sent))
                self.close_connection = True
                return
            elif m == "drop":
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data[:len(data) // 2])
                self.wfile.flush()
                log("%s %s dropped %d" % (self.command, self.path, len(data) // 2))
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in ("connection", "transfer-encoding", "content-length"):
                continue
            self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        rng = self.headers.get("Range")
        log("%s %s %d %d%s" % (self.command, self.path, resp.status, len(data), " " + rng if rng else ""))
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = forward


def main():
    blobs = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    STATE["blobstore_port"] = blobs.server_address[1]
    threading.Thread(target=blobs.serve_forever, daemon=True).start()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    if len(sys.argv) > 5:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[4], sys.argv[5])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = PORT_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, PORT_FILE)
    srv.serve_forever()


if __name__ == "__main__":
    main()
