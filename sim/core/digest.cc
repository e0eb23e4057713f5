#include "sim/core/digest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace servesim::core {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

FileVersion version_of(const struct stat& st) {
  FileVersion v;
  v.device = static_cast<uint64_t>(st.st_dev);
  v.inode = static_cast<uint64_t>(st.st_ino);
  v.size = static_cast<uint64_t>(st.st_size);
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  v.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return v;
}

}  // namespace

Sha256::Sha256(bool cpu_extensions)
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19},
      buf_{},
      hardware_(cpu_extensions && cpu_extensions_available()) {}

namespace {

inline uint32_t big_endian(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

// FIPS 180-4's compression of `n` 64-byte blocks, eight rounds per step with the working
// variables renamed instead of moved.
void blocks_portable(uint32_t* state, const unsigned char* p, size_t n) {
  for (; n > 0; --n, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) w[i] = big_endian(p + 4 * i);
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6],
             h = state[7];
#define SERVESIM_SHA256_ROUND(a, b, c, d, e, f, g, h, i)                                                     \
  {                                                                                                          \
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i]; \
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));           \
    d += t1;                                                                                                 \
    h = t1 + t2;                                                                                             \
  }
    for (int i = 0; i < 64; i += 8) {
      SERVESIM_SHA256_ROUND(a, b, c, d, e, f, g, h, i);
      SERVESIM_SHA256_ROUND(h, a, b, c, d, e, f, g, i + 1);
      SERVESIM_SHA256_ROUND(g, h, a, b, c, d, e, f, i + 2);
      SERVESIM_SHA256_ROUND(f, g, h, a, b, c, d, e, i + 3);
      SERVESIM_SHA256_ROUND(e, f, g, h, a, b, c, d, i + 4);
      SERVESIM_SHA256_ROUND(d, e, f, g, h, a, b, c, i + 5);
      SERVESIM_SHA256_ROUND(c, d, e, f, g, h, a, b, i + 6);
      SERVESIM_SHA256_ROUND(b, c, d, e, f, g, h, a, i + 7);
    }
#undef SERVESIM_SHA256_ROUND
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SERVESIM_SHA256_X86 1
// The same compression with the x86 SHA extensions (Intel's published sequence: two rounds per
// sha256rnds2, the schedule by sha256msg1/msg2), several times faster than the portable code.
__attribute__((target("sha,sse4.1,ssse3"))) void blocks_sha_ni(uint32_t* state, const unsigned char* p, size_t n) {
  const __m128i kByteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  __m128i state1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);                // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);          // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
  for (; n > 0; --n, p += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {
      __m128i& m = w[g % 4];
      if (g < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), kByteSwap);
      } else {
        // W[4g..4g+3] from the four groups before: m holds group g - 4.
        m = _mm_sha256msg1_epu32(m, w[(g + 1) % 4]);
        m = _mm_add_epi32(m, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        m = _mm_sha256msg2_epu32(m, w[(g + 3) % 4]);
      }
      __m128i k = _mm_add_epi32(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      state1 = _mm_sha256rnds2_epu32(state1, state0, k);
      k = _mm_shuffle_epi32(k, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, k);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), state1);
}

bool cpu_has_sha() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool sha = (b >> 29) & 1;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
  return sha && ssse3 && sse41;
}
#endif

}  // namespace

bool Sha256::cpu_extensions_available() {
#ifdef SERVESIM_SHA256_X86
  static const bool available = cpu_has_sha();
  return available;
#else
  return false;
#endif
}

void Sha256::blocks(const unsigned char* p, size_t n) {
#ifdef SERVESIM_SHA256_X86
  if (hardware_) {
    blocks_sha_ni(h_, p, n);
    return;
  }
#endif
  blocks_portable(h_, p, n);
}

void Sha256::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += size;
  if (used_ > 0) {
    const size_t take = std::min(size, sizeof buf_ - used_);
    std::memcpy(buf_ + used_, p, take);
    used_ += take;
    p += take;
    size -= take;
    if (used_ < sizeof buf_) return;
    blocks(buf_, 1);
    used_ = 0;
  }
  if (size >= 64) {
    blocks(p, size / 64);
    p += size / 64 * 64;
    size %= 64;
  }
  std::memcpy(buf_, p, size);
  used_ = size;
}

std::string Sha256::hex() {
  const uint64_t bits = length_ * 8;
  const unsigned char pad = 0x80;
  update(&pad, 1);
  const unsigned char zero = 0;
  while (used_ != 56) update(&zero, 1);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  update(len, 8);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h_)
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 0xf];
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex();
}

FileVersion file_version(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return version_of(st);
}

bool version_settled(const FileVersion& v) {
  constexpr int64_t kSettledNs = 2'000'000'000;
  struct timespec now {};
  if (::clock_gettime(CLOCK_REALTIME, &now) != 0) return false;
  const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  return now_ns - std::max(v.mtime_ns, v.ctime_ns) >= kSettledNs;
}

FileDigest file_digest(const std::string& path, const std::string& what) {
  static std::mutex mutex;
  static std::map<FileVersion, std::string> known;
  const FileVersion before = file_version(path);
  if (before.inode != 0) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(before); it != known.end()) return {it->second, before};
  }
  InputFile file = InputFile::open(path, what, kUnlimitedBytes);
  Sha256 h;
  std::FILE* f = file.release_to_stdio();
  std::vector<char> buf(size_t{1} << 20);
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw InputError(path, 0, "", "read error while computing its digest");
  FileDigest d{"sha256:" + h.hex(), file_version(path)};
  // A file that changed while it was read has no single digest: it must not be remembered. Nor
  // may one changed in the last seconds (version_settled).
  if (d.version == before && version_settled(d.version)) {
    std::lock_guard<std::mutex> lock(mutex);
    known[d.version] = d.digest;
  }
  return d;
}

}  // namespace servesim::core
