#include <doctest/doctest.h>

#include "engine/core/mask_workers.h"

#include <atomic>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using minfer::cpu::ThreadPool;

TEST_CASE("parallel_for covers every index exactly once, for any n and grain") {
    for (int threads : {1, 2, 3, 8}) {
        ThreadPool pool(threads);
        CHECK(pool.size() == threads);
        for (int64_t n : {0, 1, 2, 7, 9, 10, 100, 1001}) {
            for (int64_t grain : {1, 3, 64}) {
                std::vector<std::atomic<int>> hits(n);
                for (int rep = 0; rep < 3; ++rep)
                    pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
                        for (int64_t i = b; i < e; ++i) hits[i]++;
                    });
                for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 3);
            }
        }
    }
}

TEST_CASE("parallel_for: a worker left out of one job never runs the next one's ranges twice") {
    // Jobs of fewer parts than threads (2 of 8) between full ones: a worker that
    // sat out a small job must not mistake the next job's fields for its own.
    // Every range runs once, and nothing runs once parallel_for has returned.
    ThreadPool pool(8);
    std::atomic<int> running{0};
    // 8,000 rounds (20,000 took 26 to 61 s of CI): without 70aec4f's seqlock this failed 3 runs of 3.
    for (int rep = 0; rep < 8000; ++rep) {
        const int64_t n = rep % 3 == 0 ? 64 : 2;
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
            running++;
            for (int64_t i = b; i < e; ++i) hits[i]++;
            running--;
        });
        REQUIRE(running.load() == 0);
        for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
    }
}

TEST_CASE("mask workers: every job of a run once, run after run, the caller taking part") {
    minfer::MaskWorkers workers(3);
    for (size_t n : {0, 1, 2, 7, 100, 1000}) {
        std::vector<std::atomic<int>> done(n);
        workers.run(n, [&](size_t i) { done[i].fetch_add(1); });
        for (size_t i = 0; i < n; ++i) CHECK(done[i].load() == 1);
    }
}
