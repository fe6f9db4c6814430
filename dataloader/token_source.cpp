#include "dataloader/token_source.h"

#include <algorithm>
#include <stdexcept>

namespace mygpt {

InMemoryTokens::InMemoryTokens(std::vector<int64_t> tokens) : tokens_(std::move(tokens)) {
  if (tokens_.empty()) throw std::invalid_argument("token stream is empty");
}

void InMemoryTokens::read(uint64_t offset, size_t count, int64_t* out) const {
  uint64_t pos = offset % tokens_.size();
  while (count > 0) {
    const size_t n = std::min<uint64_t>(count, tokens_.size() - pos);
    std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(pos), n, out);
    out += n;
    count -= n;
    pos = 0;
  }
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> split_train_val(const std::vector<int64_t>& tokens,
                                                                      double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    throw std::invalid_argument("validation fraction must be in [0, 1)");
  }
  const auto n_train = static_cast<size_t>(static_cast<double>(tokens.size()) * (1.0 - val_fraction));
  return {std::vector<int64_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n_train)),
          std::vector<int64_t>(tokens.begin() + static_cast<std::ptrdiff_t>(n_train), tokens.end())};
}

}  // namespace mygpt
