// Every Communicator operation over MPI on the CPU, under `mpirun -np N`
// (ctest runs N = 2 and 3): all-reduce, all-gather, all-to-all-v with uneven
// counts (zero included), broadcast from each root, and send/recv around a
// ring. The values are made from the ranks so each rank knows what it must
// hold; exit code 1 when any rank holds anything else.
#include <cstdio>
#include <numeric>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_control.h"
#include "dist/mpi_session.h"

using namespace minfer;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int rank) {
    if (ok) return;
    ++failures;
    std::printf("FAIL  rank %d: %s\n", rank, what);
}

// What rank `from` sends rank `to` in all-to-all-v: (from + 2 to) mod 3 floats
// (some runs empty), element i = 1000 from + 10 to + i.
size_t count(int from, int to) { return size_t((from + 2 * to) % 3); }
float value(int from, int to, size_t i) { return float(1000 * from + 10 * to + int(i)); }

}  // namespace

int main() {
    MpiSession mpi;
    const World& world = mpi.world();
    const int me = world.rank, n = world.size;
    const auto control = make_mpi_control(world);
    auto backend = make_cpu_backend(1);
    const auto comm = make_communicator(*backend, *control);

    // all-reduce: rank r holds r + i; the sum is n i + n (n - 1) / 2.
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(me) + float(i);
    comm->all_reduce_sum(x.data(), x.size());
    bool ok = true;
    for (size_t i = 0; i < x.size(); ++i) ok &= x[i] == float(n * int(i) + n * (n - 1) / 2);
    expect(ok, "all_reduce_sum", me);
    expect(comm->floats_reduced() == x.size(), "floats_reduced counts the all-reduce", me);

    // all-gather: rank r's 3 floats at 3 r.
    const std::vector<float> mine = {float(me), float(me) + 0.5f, float(-me)};
    std::vector<float> all(3 * size_t(n));
    comm->all_gather(mine.data(), 3, all.data());
    ok = true;
    for (int r = 0; r < n; ++r) ok &= all[3 * size_t(r)] == float(r) && all[3 * size_t(r) + 2] == float(-r);
    expect(ok, "all_gather", me);

    // all-to-all-v.
    std::vector<size_t> send_counts, recv_counts;
    std::vector<float> send;
    for (int to = 0; to < n; ++to) {
        send_counts.push_back(count(me, to));
        recv_counts.push_back(count(to, me));
        for (size_t i = 0; i < count(me, to); ++i) send.push_back(value(me, to, i));
    }
    std::vector<float> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), size_t(0)), -1.0f);
    comm->all_to_all_v(send.data(), send_counts, recv.data(), recv_counts);
    ok = true;
    size_t at = 0;
    for (int from = 0; from < n; ++from)
        for (size_t i = 0; i < count(from, me); ++i) ok &= recv[at++] == value(from, me, i);
    expect(ok, "all_to_all_v", me);

    // broadcast from every root.
    for (int root = 0; root < n; ++root) {
        std::vector<int32_t> b(5, me == root ? 7 * root + 1 : -1);
        comm->broadcast(b.data(), b.size() * sizeof(int32_t), root);
        expect(b == std::vector<int32_t>(5, 7 * root + 1), "broadcast", me);
    }

    // send/recv around the ring: even ranks send first, odd ones receive first.
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    std::vector<double> out(64, double(me) * 1.25), in(64, -1.0);
    if (me % 2 == 0) {
        comm->send(out.data(), out.size() * sizeof(double), next);
        comm->recv(in.data(), in.size() * sizeof(double), prev);
    } else {
        comm->recv(in.data(), in.size() * sizeof(double), prev);
        comm->send(out.data(), out.size() * sizeof(double), next);
    }
    expect(in == std::vector<double>(64, double(prev) * 1.25), "send/recv", me);

    const int failed = int(control->min(failures ? 0 : 1) == 0);
    if (me == 0) std::printf("%s: the collectives over %d ranks\n", failed ? "FAIL" : "ok", n);
    return failed;
}
