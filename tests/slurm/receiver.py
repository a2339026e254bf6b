#!/usr/bin/env python3
"""A verdict receiver for the end-to-end tests.

Usage: receiver.py PORT KEY_FILE OUT_DIR

Accepts POST requests; checks the X-Pilot-Signature-256 header against
HMAC-SHA256(key, body) with the key from KEY_FILE (64 hex characters), and
writes each body to OUT_DIR/<n>.json with a line "<n> good|bad" appended to
OUT_DIR/log. Answers 204 for a good signature, 401 for a bad one. Writes
OUT_DIR/ready once listening.
"""
import hashlib
import hmac
import http.server
import os
import sys


def main():
    port, key_file, out_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(key_file) as f:
        key = bytes.fromhex(f.read().strip())
    count = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            want = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
            got = self.headers.get("X-Pilot-Signature-256", "")
            good = hmac.compare_digest(want, got)
            count[0] += 1
            with open(os.path.join(out_dir, "%d.json" % count[0]), "wb") as f:
                f.write(body)
            with open(os.path.join(out_dir, "log"), "a") as f:
                f.write("%d %s\n" % (count[0], "good" if good else "bad"))
            self.send_response(204 if good else 401)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    open(os.path.join(out_dir, "ready"), "w").close()
    server.serve_forever()


if __name__ == "__main__":
    main()
