#pragma once
// A token stream that batch loaders read from: in memory (tokenized text) or mapped from token files.
#include <cstdint>
#include <memory>
#include <vector>

namespace mygpt {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual uint64_t size() const = 0;
  // Copies count tokens starting at offset into out. The stream is cyclic: offsets are taken modulo
  // size() and a read that runs past the end continues at token 0, which is how loaders wrap epochs.
  virtual void read(uint64_t offset, size_t count, int64_t* out) const = 0;
};

class InMemoryTokens final : public TokenSource {
 public:
  explicit InMemoryTokens(std::vector<int64_t> tokens);
  uint64_t size() const override { return tokens_.size(); }
  void read(uint64_t offset, size_t count, int64_t* out) const override;

 private:
  std::vector<int64_t> tokens_;
};

// Splits a token sequence into (train, validation), the validation part being the last
// val_fraction of it (0 <= val_fraction < 1; 0 leaves validation empty).
std::pair<std::vector<int64_t>, std::vector<int64_t>> split_train_val(const std::vector<int64_t>& tokens,
                                                                      double val_fraction);

}  // namespace mygpt
