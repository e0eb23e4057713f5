#include "traces/block_bootstrap.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "sim/core/error.h"
#include "sim/core/rng.h"

namespace servesim::traces {
namespace {

// One request in the spill file: seven 64-bit fields, then the prefix hashes.
struct Header {
  int64_t arrival_ns, prompt_tokens, output_tokens, hashed_tokens;
  uint64_t session, hashes;
  int64_t request_class;
};

[[noreturn]] void io_error(const std::string& what) {
  throw core::Error("block bootstrap: cannot " + what + " its temporary file" +
                    (errno ? std::string(": ") + std::strerror(errno) : std::string()) +
                    " (is the temporary directory writable and not full?)");
}

}  // namespace

BlockBootstrapSource::BlockBootstrapSource(std::unique_ptr<ArrivalSource> inner, int64_t block_ns, uint64_t seed)
    : inner_(std::move(inner)), block_ns_(block_ns), seed_(seed), hash_block_tokens_(inner_->hash_block_tokens()),
      classes_(inner_->classes()) {
  if (block_ns_ <= 0) throw core::Error("internal: block bootstrap with a block of " + std::to_string(block_ns_) + " ns");
}

BlockBootstrapSource::~BlockBootstrapSource() = default;

void BlockBootstrapSource::spill() {
  spilled_ = true;
  errno = 0;
  file_.reset(std::tmpfile());
  if (!file_) io_error("create");
  RequestSpec r;
  int64_t first = 0, last = 0, n = 0;
  while (inner_->next(r)) {
    if (n == 0) first = r.arrival.ns();
    last = r.arrival.ns();
    const size_t block = static_cast<size_t>(last / block_ns_);
    while (block_offset_.size() <= block) {
      block_offset_.push_back(std::ftell(file_.get()));
      block_count_.push_back(0);
    }
    ++block_count_[block];
    const Header h{r.arrival.ns(), r.prompt_tokens, r.output_tokens, r.hashed_tokens, r.session, r.block_hashes.size(), r.request_class};
    if (std::fwrite(&h, sizeof h, 1, file_.get()) != 1) io_error("write");
    if (!r.block_hashes.empty() &&
        std::fwrite(r.block_hashes.data(), sizeof(uint64_t), r.block_hashes.size(), file_.get()) != r.block_hashes.size())
      io_error("write");
    ++n;
  }
  inner_.reset();  // the trace file is closed: everything is in the spill file
  if (n == 0) return;
  // The period: the last arrival plus one mean gap, so that a resample wrapping around does not put
  // the last arrival and the first on one instant.
  period_ns_ = last + (n > 1 ? (last - first) / (n - 1) : block_ns_);
  const size_t blocks = static_cast<size_t>((period_ns_ + block_ns_ - 1) / block_ns_);
  while (block_offset_.size() < blocks) {
    block_offset_.push_back(std::ftell(file_.get()));
    block_count_.push_back(0);
  }
  core::Rng rng(seed_, "block_bootstrap");
  plan_.resize(blocks);
  for (auto& b : plan_) b = static_cast<uint32_t>(rng.uniform_int(blocks));
  start_segment(0, 0);
}

bool BlockBootstrapSource::start_segment(size_t j, int segment) {
  for (; j < plan_.size(); ++j, segment = 0) {
    const uint32_t src = plan_[j];
    const bool wraps = src + 1 == block_offset_.size();  // the last block goes on from the start
    for (; segment < (wraps ? 2 : 1); ++segment) {
      // Segment 0: the block's own records. Segment 1 (the last block only): the trace's first
      // records up to K L - P, one period later, so that every block spans L on the circle.
      const size_t from = segment == 0 ? src : 0;
      if (block_count_[from] == 0) continue;
      errno = 0;
      if (std::fseek(file_.get(), block_offset_[from], SEEK_SET) != 0) io_error("seek in");
      block_ = j;
      segment_ = segment;
      left_ = block_count_[from];
      shift_ns_ = segment == 0 ? 0 : period_ns_;
      limit_ns_ = segment == 0 ? INT64_MAX : static_cast<int64_t>(plan_.size()) * block_ns_ - period_ns_;
      return true;
    }
  }
  block_ = plan_.size();
  return false;
}

bool BlockBootstrapSource::read_record(RequestSpec& out) {
  Header h;
  errno = 0;
  if (std::fread(&h, sizeof h, 1, file_.get()) != 1) io_error("read");
  out.arrival = core::Time::from_ns(h.arrival_ns);
  out.prompt_tokens = h.prompt_tokens;
  out.output_tokens = h.output_tokens;
  out.hashed_tokens = h.hashed_tokens;
  out.session = h.session;
  out.request_class = static_cast<int32_t>(h.request_class);
  out.block_hashes.resize(h.hashes);
  if (h.hashes > 0 && std::fread(out.block_hashes.data(), sizeof(uint64_t), h.hashes, file_.get()) != h.hashes)
    io_error("read");
  return true;
}

bool BlockBootstrapSource::next(RequestSpec& out) {
  if (!spilled_) spill();
  while (block_ < plan_.size()) {
    if (left_ == 0) {
      if (!start_segment(segment_ == 0 ? block_ : block_ + 1, segment_ + 1)) return false;
      continue;
    }
    --left_;
    read_record(out);
    if (out.arrival.ns() >= limit_ns_) {  // the wrapped segment ends at K L - P
      left_ = 0;
      continue;
    }
    // Source block b starts at b x L (its wrapped part one period later); output block j at j x L.
    const int64_t offset = out.arrival.ns() + shift_ns_ - static_cast<int64_t>(plan_[block_]) * block_ns_;
    const int64_t at = static_cast<int64_t>(block_) * block_ns_ + offset;
    if (at >= period_ns_) {  // the last output block is cut at the period
      block_ = plan_.size();
      return false;
    }
    out.arrival = core::Time::from_ns(at);
    return true;
  }
  return false;
}

}  // namespace servesim::traces
