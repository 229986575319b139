// Stable counting-sort scatter in two cache-friendly steps, for int32 payloads.
//
// The one-step scatter out[cursor[t][key]++] = value (graph.cpp bucket_starts' scheme) writes
// every item to a random place of an output far larger than the caches, so almost every item
// misses twice (cursor and output line).  Here each chunk first appends (key, value) pairs to
// buckets of 2^S consecutive keys (about 2^16 items each, so a bucket's output and cursors fit in
// the L2 cache), in its own item order, then each bucket is scattered into its rows, chunk by
// chunk: the same cursor sequence per key, hence the same output as the one-step scatter for
// every thread count.  Scratch: 4 or 8 bytes per item (the pairs).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "parallel.h"

namespace ldp {

struct TwoStepScatter {
    int64_t n = 0, B = 0;
    int S = 0, nt = 1;
    int vb = 32;  // a pair is (key's low S bits) << vb | value: 32-bit pairs when S + vb <= 32
    std::vector<int64_t> boff;  // (bucket q, chunk t) -> first pair of chunk t in bucket q

    // count(t, key): items of chunk t with that key (keys in [0, n), E items in all).
    template <class Count>
    TwoStepScatter(int64_t n_, int64_t E, int nt_, Count&& count) : n(n_), nt(nt_) {
        while (((int64_t)1 << S) * std::max<int64_t>(1, E >> 16) < n) ++S;
        B = (n + ((int64_t)1 << S) - 1) >> S;
        boff.assign(B * nt + 1, 0);
        for (int64_t j = 0; j < n; ++j)
            for (int t = 0; t < nt; ++t) boff[(j >> S) * nt + t + 1] += count(t, j);
        for (size_t x = 1; x < boff.size(); ++x) boff[x] += boff[x - 1];
    }

    // Whether values below vmax pack with the key bits into 32-bit pairs (then sets vb).
    bool pack32(int64_t vmax) {
        int bits = 0;
        while (bits < 32 && ((int64_t)1 << bits) < vmax) ++bits;
        if (bits >= 32 || S + bits > 32) return false;  // (a 32-bit shift by 32 is undefined)
        vb = bits;
        return true;
    }

    // Step 1, chunk t: items(push) calls push(key, value) for the chunk's items in order.
    template <class P, class Items>
    void append(int t, P* pairs, Items&& items) const {
        std::vector<int64_t> wp(B);  // this chunk's write position in each bucket
        for (int64_t q = 0; q < B; ++q) wp[q] = boff[q * nt + t];
        const int64_t low = ((int64_t)1 << S) - 1;
        items([&](int64_t key, uint32_t value) { pairs[wp[key >> S]++] = (P)((P)(key & low) << vb | value); });
    }

    // Step 2 (after every chunk's append): out[cursor[t][key]++] = value, bucket by bucket.
    template <class P, class C>
    void scatter(const P* pairs, std::vector<std::vector<int64_t>>& cursor, C* out) const {
        const P vmask = (P)(((uint64_t)1 << vb) - 1);
        for_blocks(B, [&](int64_t q) {
            for (int t = 0; t < nt; ++t) {
                int64_t* c = cursor[t].data() + (q << S);  // the bucket's keys, by their low bits
                for (int64_t x = boff[q * nt + t]; x < boff[q * nt + t + 1]; ++x)
                    out[c[pairs[x] >> vb]++] = (C)(pairs[x] & vmask);
            }
        });
    }
};

// The whole scatter when the cursors are bucket_starts' (graph.cpp): start[t][key] = where chunk t's
// first item with that key goes, rowptr the keys' row starts; items(t, push) pushes chunk t's
// items in order.  Values below n (node ids, n <= 2^32); 4-byte pairs when they fit.
template <class C, class Items>
void two_step_scatter(int64_t n, const int64_t* rowptr, std::vector<std::vector<int64_t>>& start, C* out,
                      Items&& items) {
    const int nt = (int)start.size();
    const int64_t E = rowptr[n];
    TwoStepScatter sc(n, E, nt, [&](int t, int64_t key) {
        return (t + 1 < nt ? start[t + 1][key] : rowptr[key + 1]) - start[t][key];
    });
    auto run = [&](auto* pairs) {
        parallel_for(nt, [&](int64_t b, int64_t e, int) {
            for (int64_t t = b; t < e; ++t) sc.append((int)t, pairs, [&](auto push) { items(t, push); });
        }, 1);
        sc.scatter(pairs, start, out);
    };
    if (sc.pack32(n)) {
        std::unique_ptr<uint32_t[]> pairs(new uint32_t[std::max<int64_t>(E, 1)]);
        run(pairs.get());
    } else {
        std::unique_ptr<uint64_t[]> pairs(new uint64_t[std::max<int64_t>(E, 1)]);
        run(pairs.get());
    }
}

}  // namespace ldp
