#!/usr/bin/env python3
"""Replays a pilot-runner allocator trace (PILOT_RUNNER_ALLOC_TRACE) through a
model of torch's CUDA caching allocator with expandable segments, and says
how close the model is: the addresses it gives each request (relative to its
segment) and the bytes it maps, against the trace's own.

    bench/alloc_replay.py TRACE [--limit MIB] [--verbose]
    bench/alloc_replay.py TRACE --needs

With --limit the replay is held to MIB of mapped memory (the allocator's
memory fraction), as under training.memory_cap_mb: it reports the releases
(cached pages unmapped to make room) and any out-of-memory.

--needs prints, as one JSON object, what the trace's process needed (up to
its first "# empty_cache" line: the steps, not the checks after them), found
by bisection to 2 MiB on the limit: to run at all (no request fails), at
full speed (nothing released from the second half of its steps on), and
what it mapped with nothing limiting it; bytes. This is the measurement
bench/memory-model.sh compares pilot plan's replay with; it shares no code
with it.
"""
import argparse
import bisect
import sys

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_GRANULE = 2 << 20
LARGE_GRANULE = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else (n + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


def allocation_size(n):
    if n <= SMALL_SIZE:
        return SMALL_GRANULE
    if n < MIN_LARGE_ALLOC:
        return LARGE_GRANULE
    return (n + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class Block:
    __slots__ = ("ptr", "size", "allocated", "mapped", "prev", "next", "pool")

    def __init__(self, pool, ptr, size, mapped):
        self.pool, self.ptr, self.size, self.mapped = pool, ptr, size, mapped
        self.allocated = False
        self.prev = self.next = None


class Pool:
    def __init__(self, small, base):
        self.small = small
        self.granule = SMALL_GRANULE if small else LARGE_GRANULE
        self.base = base
        self.free = []      # sorted (size, ptr, id) of free mapped blocks
        self.unmapped = []  # sorted (ptr, id) of unmapped blocks
        self.byid = {}
        self.head = None

    def key(self, b):
        return (b.size, b.ptr, id(b))

    def add_free(self, b):
        self.byid[id(b)] = b
        bisect.insort(self.free, self.key(b))

    def del_free(self, b):
        i = bisect.bisect_left(self.free, self.key(b))
        assert self.free[i][2] == id(b)
        del self.free[i]

    def add_unmapped(self, b):
        self.byid[id(b)] = b
        bisect.insort(self.unmapped, (b.ptr, id(b)))

    def del_unmapped(self, b):
        i = bisect.bisect_left(self.unmapped, (b.ptr, id(b)))
        assert self.unmapped[i][1] == id(b)
        del self.unmapped[i]


class Allocator:
    def __init__(self, limit=None):
        self.limit = limit
        self.mapped = 0
        self.peak_mapped = 0
        self.allocated = 0
        self.peak_allocated = 0
        self.pools = {}
        self.retries = 0
        self.ooms = 0

    def pool(self, small, stream):
        k = (small, stream)
        if k not in self.pools:
            base = (len(self.pools) + 1) << 44
            p = Pool(small, base)
            b = Block(p, base, 1 << 43, False)
            p.head = b
            p.add_unmapped(b)
            self.pools[k] = p
        return self.pools[k]

    @staticmethod
    def expandable_size(b):
        return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

    def get_free_block(self, p, size):
        i = bisect.bisect_left(p.free, (size, -1, -1))
        if i == len(p.free):
            return None
        b = p.byid[p.free[i][2]]
        # Best fit counts what a block can grow into: a smaller block
        # after it in size order that cannot grow is taken first.
        j = i + 1
        while j < len(p.free):
            n = p.byid[p.free[j][2]]
            if self.expandable_size(n) < self.expandable_size(b):
                b = n
                j += 1
            else:
                break
        p.del_free(b)
        return b

    def merge(self, p, dst, src):
        if src is None or src.allocated or dst.mapped != src.mapped:
            return
        if src.mapped:
            p.del_free(src)
        else:
            p.del_unmapped(src)
        if dst.prev is src:
            dst.ptr = src.ptr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
            if p.head is src:
                p.head = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size

    def map_block(self, p, b, size):
        g = p.granule
        begin = (b.ptr - p.base) // g
        end = (b.ptr + size - p.base + g - 1) // g
        n = (end - begin) * g
        p.del_unmapped(b)
        b.mapped = True
        if n < b.size:
            rest = Block(p, b.ptr + n, b.size - n, False)
            rest.prev, rest.next = b, b.next
            if b.next is not None:
                b.next.prev = rest
            b.next = rest
            p.add_unmapped(rest)
            b.size = n
        self.merge(p, b, b.prev)
        self.merge(p, b, b.next)
        p.add_free(b)
        self.mapped += n
        self.peak_mapped = max(self.peak_mapped, self.mapped)
        return b

    def find_expandable(self, p, size):
        for ptr, bid in p.unmapped:
            c = p.byid[bid]
            if c.prev is not None and not c.prev.allocated:
                c = c.prev
            got, x = 0, c
            while got < size and x is not None and not x.allocated:
                got += x.size
                x = x.next
            if got >= size:
                return c
        raise RuntimeError("address space exhausted")

    def try_expandable(self, p, size):
        c = self.find_expandable(p, size)
        if not c.mapped:
            c = self.map_block(p, c, min(c.size, size))
        while c.size < size:
            nxt = c.next
            c = self.map_block(p, nxt, min(size - c.size, nxt.size))
        p.del_free(c)
        return c

    def unmap_block(self, p, b):
        g = p.granule
        begin = -(-(b.ptr - p.base) // g)
        end = (b.ptr + b.size - p.base) // g
        if begin >= end:
            return
        p.del_free(b)
        lo, hi = p.base + begin * g, p.base + end * g
        if lo > b.ptr:
            before = Block(p, b.ptr, lo - b.ptr, True)
            before.prev, before.next = b.prev, b
            if b.prev is not None:
                b.prev.next = before
            elif p.head is b:
                p.head = before
            b.prev = before
            p.add_free(before)
        if b.ptr + b.size > hi:
            after = Block(p, hi, b.ptr + b.size - hi, True)
            after.prev, after.next = b, b.next
            if b.next is not None:
                b.next.prev = after
            b.next = after
            p.add_free(after)
        b.ptr, b.size, b.mapped = lo, hi - lo, False
        self.merge(p, b, b.prev)
        self.merge(p, b, b.next)
        p.add_unmapped(b)
        self.mapped -= hi - lo

    def release_cached(self):
        for small in (False, True):
            for (s, _), p in list(self.pools.items()):
                if s != small:
                    continue
                for _, _, bid in list(p.free):
                    b = p.byid[bid]
                    if not b.allocated and b.mapped:
                        self.unmap_block(p, b)

    def malloc(self, n, stream):
        size = round_size(n)
        p = self.pool(size <= SMALL_SIZE, stream)
        b = self.get_free_block(p, size)
        if b is None:
            need = allocation_size(size)
            ok = self.limit is None or self.mapped + need <= self.limit
            if not ok:
                self.release_cached()
                self.retries += 1
                ok = self.mapped + need <= self.limit
            if not ok:
                self.ooms += 1
                return None
            b = self.try_expandable(p, size)
        if b.size - size >= MIN_BLOCK:
            rest = Block(p, b.ptr + size, b.size - size, True)
            rest.prev, rest.next = b, b.next
            if b.next is not None:
                b.next.prev = rest
            b.next = rest
            b.size = size
            p.add_free(rest)
        b.allocated = True
        self.allocated += b.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def free(self, b):
        p = b.pool
        b.allocated = False
        self.allocated -= b.size
        self.merge(p, b, b.prev)
        self.merge(p, b, b.next)
        p.add_free(b)


def read_trace(path):
    events = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                events.append(("#", line[2:].strip(), 0, 0))
                continue
            k, a, s, st = line.split()
            events.append((k, int(a), int(s), int(st)))
    return events


def replay(events, limit=None, verbose=False):
    al = Allocator(limit)
    live = {}
    real_mapped = 0
    real_peak = 0
    real_base = {}
    mismatches = 0
    checked = 0
    note = ""
    for k, a, s, st in events:
        if k == "#":
            note = a
            if verbose:
                print(f"{note:40s} sim mapped {al.mapped / 2**30:8.3f} real {real_mapped / 2**30:8.3f} "
                      f"alloc {al.allocated / 2**30:8.3f}")
            if note == "empty_cache":
                al.release_cached()
            continue
        if k == "a":
            b = al.malloc(s, st)
            if b is None:
                print(f"sim: out of memory at {note}: {s} bytes, mapped {al.mapped / 2**30:.3f} GiB")
                return al, real_peak
            live[a] = b
            small = round_size(s) <= SMALL_SIZE
            key = (small, st)
            if key not in real_base:
                real_base[key] = a - (b.ptr - b.pool.base)
            checked += 1
            if a - real_base[key] != b.ptr - b.pool.base:
                mismatches += 1
                if verbose and mismatches <= 20:
                    print(f"  address differs at {note}: real +{(a - real_base[key]) / 2**20:.2f} MiB "
                          f"sim +{(b.ptr - b.pool.base) / 2**20:.2f} MiB size {s}")
        elif k == "f":
            b = live.pop(a, None)
            if b is not None:
                al.free(b)
        elif k == "m":
            real_mapped += s
            real_peak = max(real_peak, real_mapped)
        elif k == "u":
            real_mapped -= s
        elif k == "o":
            print(f"trace: out of memory at {note}")
    print(f"requests {checked}, addresses differing {mismatches}; mapped peak sim "
          f"{al.peak_mapped / 2**30:.3f} GiB, trace {real_peak / 2**30:.3f} GiB; allocated peak "
          f"{al.peak_allocated / 2**30:.3f} GiB; releases {al.retries}, out of memory {al.ooms}")
    return al, real_peak


def requests(events):
    """The process's requests up to its first empty_cache: ('a', bytes) and
    ('f', index of the request freed), and where its second half of steps
    begins."""
    ops, live, steps = [], {}, []
    for k, a, s, st in events:
        if k == "#":
            if a == "empty_cache":
                break
            if a.startswith("step "):
                steps.append(len(ops))
            continue
        if k == "a":
            live[a] = len(ops)
            ops.append(("a", s))
        elif k == "f" and a in live:
            ops.append(("f", live.pop(a)))
    late = steps[len(steps) // 2] if steps else len(ops)
    return ops, late


def run(ops, limit, late):
    """(failed, releases at or after op `late`, mapped peak, allocated peak)"""
    al = Allocator(limit)
    blocks = {}
    late_releases = 0
    for i, (k, v) in enumerate(ops):
        if k == "a":
            before = al.retries
            b = al.malloc(v, 0)
            if b is None:
                return True, late_releases, al.peak_mapped, al.peak_allocated
            if al.retries > before and i >= late:
                late_releases += 1
                if limit is not None:
                    return False, late_releases, al.peak_mapped, al.peak_allocated
            blocks[i] = b
        else:
            b = blocks.pop(v, None)
            if b is not None:
                al.free(b)
    return False, late_releases, al.peak_mapped, al.peak_allocated


def needs(ops, late):
    _, _, unlimited, allocated = run(ops, None, late)

    def least(lo, ok):
        hi = max(lo + SMALL_GRANULE, unlimited)
        while not ok(hi):
            hi += LARGE_GRANULE
        while hi - lo > SMALL_GRANULE:
            mid = lo + (hi - lo) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi, lo

    to_run, lo = least(allocated - 1, lambda m: not run(ops, m, len(ops))[0])
    full, _ = least(lo, lambda m: run(ops, m, late)[:2] == (False, 0))
    return {"to_run": to_run, "full_speed": full, "unlimited": unlimited, "allocated": allocated}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--limit", type=float, help="MiB the allocator may map")
    ap.add_argument("--needs", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.needs:
        import json
        print(json.dumps(needs(*requests(read_trace(a.trace)))))
        return 0
    replay(read_trace(a.trace), int(a.limit * 2**20) if a.limit else None, a.verbose)


if __name__ == "__main__":
    sys.exit(main())
