#!/usr/bin/env python3
"""oci_hostile.py: a hostile OCI registry for the poisoning tests: it serves crafted manifests and blobs (tests only).

usage: oci_hostile.py craft REGISTRY REPO DIGEST EVIL_LAYER OUT_DIR TAG [--new-config=N] [--bad-sha]
       oci_hostile.py serve OUT_DIR PORT_FILE
craft takes the victim's snapshot (manifest DIGEST of REPO on the plain-HTTP
REGISTRY host:port), and writes into OUT_DIR what an attacker publishes under
REPO-less TAG (e.g. other:v1, served as evil/other:v1): the same manifest,
listing the victim's layer (its id, size and sha256),
but with a chunk index of its own, made from the bytes of EVIL_LAYER (a file
of the layer's size), and those bytes served as the layer's blob. With
--new-config=N the snapshot is another one (its created time moved by N ns),
so the attacker's snapshot id differs from the victim's. With --bad-sha the
layer's descriptor names it by a wrong sha256 (its id stays). The XXH3-128 ids
come from libxxhash (XXH3-128, canonical byte order, as store/id.c). It prints the crafted manifest's digest.
serve answers GET/HEAD of /v2/, manifests (by TAG or digest) and blobs (with
Range) from OUT_DIR on 127.0.0.1 (a free port, written to PORT_FILE), as a
registry would, except that it never checks a digest.
"""
import ctypes
import hashlib
import http.server
import json
import os
import re
import sys
import urllib.request

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
LAYER = "application/vnd.strata.layer.v1"
CHUNKS = "application/vnd.strata.chunks.v1"
ANN_ID = "dev.strata.id"


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req) as r:
        return r.read()


def craft(reg, repo, digest, evil_path, out, tag, new_config, bad_sha=False):
    # A strata id is XXH3-128 in canonical (big-endian: high, then low
    # half) byte order (store/id.c); libstrata exports only its API, so
    # the ids come from libxxhash itself.
    class H128(ctypes.Structure):
        _fields_ = [("low", ctypes.c_uint64), ("high", ctypes.c_uint64)]
    xxh = ctypes.CDLL("libxxhash.so.0")
    xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    xxh.XXH3_128bits.restype = H128

    def sid(data):
        h = xxh.XXH3_128bits(data, len(data))
        raw = h.high.to_bytes(8, "big") + h.low.to_bytes(8, "big")
        return raw, raw.hex()

    base = "http://%s/v2/%s" % (reg, repo)
    man = json.loads(get("%s/manifests/%s" % (base, digest), MANIFEST))
    blobs = {}
    layers = [d for d in man["layers"] if d["mediaType"] == LAYER]
    chunks = [d for d in man["layers"] if d["mediaType"] == CHUNKS]
    evil = open(evil_path, "rb").read()
    if len(layers) != 1 or len(chunks) != 1 or len(evil) != layers[0]["size"]:
        sys.exit("craft: want one layer and its chunk index, and an evil layer of %d bytes" % layers[0]["size"])
    real = get("%s/blobs/%s" % (base, chunks[0]["digest"]))
    # The victim's header (magic, the layer's id and size, chunk size), the
    # attacker's chunks: each chunk id is XXH3-128 of the evil bytes.
    cs = int.from_bytes(real[32:36], "little")
    idx = real[:40] + b"".join(sid(evil[o:o + cs])[0] for o in range(0, len(evil), cs))
    chunks[0]["digest"] = "sha256:" + hashlib.sha256(idx).hexdigest()
    chunks[0]["size"] = len(idx)
    chunks[0]["annotations"][ANN_ID] = sid(idx)[1]
    blobs[chunks[0]["digest"]] = idx
    if bad_sha:
        layers[0]["digest"] = "sha256:" + hashlib.sha256(b"not the layer").hexdigest()
    blobs[layers[0]["digest"]] = evil  # served under the victim's digest: never checked here
    config = get("%s/blobs/%s" % (base, man["config"]["digest"]))
    if new_config:
        text = config.decode()
        m = re.search(r'"created":"[^"]*?(\d)Z"', text)
        d = str((int(m.group(1)) + new_config) % 10)
        config = (text[:m.start(1)] + d + text[m.end(1):]).encode()
        man["config"]["digest"] = "sha256:" + hashlib.sha256(config).hexdigest()
        man["config"]["size"] = len(config)
        man["config"]["annotations"][ANN_ID] = sid(config)[1]
    blobs[man["config"]["digest"]] = config
    body = json.dumps(man, separators=(",", ":")).encode()
    mdg = "sha256:" + hashlib.sha256(body).hexdigest()
    name, ref = tag.split(":", 1)
    os.makedirs(out + "/blobs", exist_ok=True)
    os.makedirs("%s/manifests/%s" % (out, name), exist_ok=True)
    for dg, data in blobs.items():
        open("%s/blobs/%s" % (out, dg), "wb").write(data)
    for r in (ref, mdg):
        open("%s/manifests/%s/%s" % (out, name, r), "wb").write(body)
    print(mdg)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def serve(self, head):
        p = self.path.split("?")[0]
        if p in ("/v2", "/v2/"):
            return self.answer(200, b"{}", {"Content-Type": "application/json"}, head)
        m = re.match(r"^/v2/(?:.+/)?([^/]+)/(manifests|blobs)/([^/]+)$", p)
        f = m and (os.path.join(self.root, "manifests", m.group(1), m.group(3)) if m.group(2) == "manifests"
                   else os.path.join(self.root, "blobs", m.group(3)))
        if not f or not os.path.isfile(f) or m.group(3).startswith("."):
            return self.answer(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', {"Content-Type": "application/json"},
                               head)
        data = open(f, "rb").read()
        if m.group(2) == "manifests":
            dg = "sha256:" + hashlib.sha256(data).hexdigest()
            return self.answer(200, data, {"Content-Type": MANIFEST, "Docker-Content-Digest": dg}, head)
        rng = re.match(r"^bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if rng:
            a = int(rng.group(1))
            b = min(int(rng.group(2)) if rng.group(2) else len(data) - 1, len(data) - 1)
            return self.answer(206, data[a:b + 1], {"Content-Range": "bytes %d-%d/%d" % (a, b, len(data)),
                                                    "Content-Type": "application/octet-stream"}, head)
        return self.answer(200, data, {"Content-Type": "application/octet-stream"}, head)

    def do_GET(self):
        self.serve(False)

    def do_HEAD(self):
        self.serve(True)


def serve(root, port_file):
    Handler.root = root
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) >= 8 and sys.argv[1] == "craft":
        n = [int(a.split("=", 1)[1]) for a in sys.argv[8:] if a.startswith("--new-config=")]
        craft(*sys.argv[2:8], new_config=n[0] if n else 0, bad_sha="--bad-sha" in sys.argv[8:])
    elif len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
