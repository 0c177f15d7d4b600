#include "server/bench/arrivals.h"

#include <cmath>
#include <random>

namespace minfer::bench {

std::vector<double> gamma_gaps(size_t n, double rate, double burstiness, uint64_t seed) {
    std::mt19937_64 rng(seed);
    // Gamma(k, theta) has mean k * theta: theta = 1 / (rate * k) gives 1/rate.
    std::gamma_distribution<double> gamma(burstiness, 1.0 / (rate * burstiness));
    std::vector<double> gaps(n);
    for (double& g : gaps) g = gamma(rng);
    return gaps;
}

std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed) {
    std::vector<double> t(n, 0.0);
    if (n == 0 || std::isinf(rate)) return t;
    if (std::isinf(burstiness)) {  // the limit of ever more regular gaps
        for (size_t i = 0; i < n; i++) t[i] = static_cast<double>(i + 1) / rate;
        return t;
    }
    const std::vector<double> gaps = gamma_gaps(n, rate, burstiness, seed);
    double sum = 0;
    for (size_t i = 0; i < n; i++) t[i] = sum += gaps[i];
    if (sum > 0) {
        const double scale = static_cast<double>(n) / rate / sum;
        for (double& x : t) x *= scale;
    }
    return t;
}

}  // namespace minfer::bench
