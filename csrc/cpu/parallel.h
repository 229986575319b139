// Minimal std::thread parallel-for.  No OpenMP: torch wheels bundle their own libgomp and
// two OpenMP runtimes in one process can deadlock or oversubscribe.  Work is split into
// static contiguous chunks; all randomness is counter-addressed, so the split never
// changes results.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace ldp {

int get_num_threads();
void set_num_threads(int n);

// f(begin, end, thread_id) over [0, n) in at most get_num_threads() chunks.
template <class F>
void parallel_for(int64_t n, F&& f, int64_t min_chunk = 2048) {
    if (n <= 0) return;
    int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), (n + min_chunk - 1) / min_chunk));
    if (nt == 1) {
        f(int64_t(0), n, 0);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs(nt);
    int64_t chunk = (n + nt - 1) / nt;
    for (int64_t t = 0; t < nt; ++t) {
        int64_t b = t * chunk, e = std::min(n, b + chunk);
        if (b >= e) break;
        pool.emplace_back([&, b, e, t] {
            try {
                f(b, e, (int)t);
            } catch (...) {
                errs[t] = std::current_exception();
            }
        });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errs)
        if (e) std::rethrow_exception(e);
}

// Balanced split of rows by a prefix array (e.g. CSR rowptr): each thread gets about the
// same number of entries rather than rows, which matters on power-law graphs.
template <class F>
void parallel_for_weighted(int64_t n, const int64_t* prefix, F&& f) {
    if (n <= 0) return;
    int64_t total = prefix[n] - prefix[0];
    int nt = get_num_threads();
    if (nt <= 1 || total + n < 4096) {
        f(int64_t(0), n, 0);
        return;
    }
    std::vector<int64_t> cuts(nt + 1, n);
    cuts[0] = 0;
    for (int t = 1; t < nt; ++t) {
        int64_t target = prefix[0] + total * t / nt;
        cuts[t] = std::lower_bound(prefix, prefix + n, target) - prefix;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs(nt);
    for (int t = 0; t < nt; ++t) {
        int64_t b = cuts[t], e = cuts[t + 1];
        if (b >= e) continue;
        pool.emplace_back([&, b, e, t] {
            try {
                f(b, e, t);
            } catch (...) {
                errs[t] = std::current_exception();
            }
        });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errs)
        if (e) std::rethrow_exception(e);
}

// f(b) for b in [0, nb), blocks handed out in order to up to get_num_threads() threads.
template <class F>
void for_blocks(int64_t nb, F&& f) {
    int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), nb));
    std::atomic<int64_t> next{0};
    parallel_for(nt, [&](int64_t, int64_t, int) {
        for (int64_t b; (b = next.fetch_add(1)) < nb;) f(b);
    }, 1);
}

}  // namespace ldp
