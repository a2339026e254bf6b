#!/usr/bin/env python3
"""Pushes a small image to an OCI registry through its HTTP API.

Usage: registry.py push BASE_URL REPO TAG SALT   -> prints the manifest digest

Uploads a config blob and one layer blob (their bytes depend on SALT, so a
new SALT gives a new digest), then PUTs a Docker v2 schema 2 manifest under
TAG. Used to move a tag during a test.
"""
import hashlib
import json
import sys
import urllib.request


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, dict(resp.headers), resp.read()


def push_blob(base, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _, headers, _ = request("POST", "%s/v2/%s/blobs/uploads/" % (base, repo), b"")
    location = headers["Location"]
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    request("PUT", "%s%sdigest=%s" % (location, sep, digest), data,
            {"Content-Type": "application/octet-stream"})
    return digest, len(data)


def main():
    _, base, repo, tag, salt = sys.argv[1:6]
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Labels": {"salt": salt}},
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layer = ("layer " + salt).encode()
    cdig, csize = push_blob(base, repo, config)
    ldig, lsize = push_blob(base, repo, layer)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": csize, "digest": cdig},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": lsize, "digest": ldig}],
    }).encode()
    request("PUT", "%s/v2/%s/manifests/%s" % (base, repo, tag), manifest,
            {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    print("sha256:" + hashlib.sha256(manifest).hexdigest())


if __name__ == "__main__":
    main()
