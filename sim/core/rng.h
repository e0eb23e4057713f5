#pragma once
// Deterministic random streams. The algorithms (xoshiro256**, splitmix64 seeding, our own
// distributions) are fixed here rather than taken from <random>, whose distributions differ between
// standard libraries: the same seed gives the same numbers everywhere.

#include <cstdint>
#include <string_view>

namespace servesim::core {

uint64_t splitmix64(uint64_t& state);
// Stable 64-bit FNV-1a hash, used to derive stream ids from names and to hash configs.
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);

class Rng {
 public:
  // `stream` separates independent consumers that share one run seed (arrivals, lengths, router...).
  Rng(uint64_t seed, uint64_t stream);
  Rng(uint64_t seed, std::string_view stream_name) : Rng(seed, fnv1a64(stream_name)) {}

  uint64_t next_u64();
  double uniform();                       // [0, 1), 53 random bits
  double uniform_open();                  // (0, 1), never 0, for logarithms
  uint64_t uniform_int(uint64_t n);       // [0, n), unbiased; n > 0
  double exponential(double rate);        // mean 1/rate
  double normal();                        // standard normal
  double gamma(double shape, double scale);  // mean shape*scale
  double lognormal(double mu, double sigma);

 private:
  uint64_t s_[4];
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

}  // namespace servesim::core
