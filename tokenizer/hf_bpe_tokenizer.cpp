// HfBpeTokenizer's lookups (ids, bytes, vocabulary) over the state its reader built. The rest of it: reading
// in hf_tokenizer_json_reader.cpp, encoding in hf_bpe_encoding.cpp and hf_pretokenizer.cpp, restart points in
// hf_restart_points.cpp; writing tokenizer.json in hf_tokenizer_json_writer.cpp.
#include "tokenizer/hf_bpe_tokenizer.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "tokenizer/hf_bpe_tokenizer_impl.h"

namespace mygpt {

using hf_bpe::AddedToken;

std::string_view HfBpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->has_id.size() || !impl_->has_id[id]) {
    throw std::invalid_argument("token id " + std::to_string(id) + " is not in the tokenizer " +
                                impl_->where.substr(0, impl_->where.size() - 2));
  }
  return impl_->token_bytes[id];
}

bool HfBpeTokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->has_id.size() && impl_->has_id[id];
}

std::vector<int32_t> HfBpeTokenizer::special_ids() const {
  std::vector<int32_t> ids;
  for (const auto* list : {&impl_->raw_added, &impl_->normalized_added}) {
    for (const AddedToken& token : *list) {
      if (token.special) ids.push_back(token.id);
    }
  }
  return ids;
}

std::string HfBpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (const int32_t id : ids) text += token_bytes(id);
  return text;
}

std::size_t HfBpeTokenizer::vocab_size() const { return impl_->has_id.size(); }

std::optional<int32_t> HfBpeTokenizer::token_id(std::string_view spelling) const {
  const auto it = impl_->id_of_spelling.find(spelling);
  if (it == impl_->id_of_spelling.end()) return std::nullopt;
  return it->second;
}

HfBpeTokenizer::HfBpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfBpeTokenizer::HfBpeTokenizer(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer& HfBpeTokenizer::operator=(HfBpeTokenizer&&) noexcept = default;
HfBpeTokenizer::~HfBpeTokenizer() = default;

}  // namespace mygpt
