#include "eval/validation_batches.h"

#include <algorithm>

#include "common/strprintf.h"

namespace mygpt {

ValidationBatches validation_batches(int64_t requested, const ShardedBatchLoader& loader) {
  const auto held = static_cast<int64_t>(std::min<uint64_t>(loader.whole_chunks(), INT64_MAX));
  if (requested <= held) return {requested, ""};
  return {held, strprintf("note: --eval-steps %lld asks for more validation batches than the data holds (%lld of "
                          "%lld x %lld tokens); scoring those %lld once each",
                          static_cast<long long>(requested), static_cast<long long>(held),
                          static_cast<long long>(loader.batch_size()), static_cast<long long>(loader.seq_len()),
                          static_cast<long long>(held))};
}

}  // namespace mygpt
