#pragma once
// Helpers the GoogleTest suites share: small model shapes, the message of an expected bad-input error,
// and where the shared real data lives.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "model/gpt_config.h"
#include "tests/test_data.h"

namespace mygpt::testing {

// The real public data (tests/test_data.h: ../shared/data, or the download cache); tests that need it skip
// when it is absent.
inline const std::filesystem::path kSharedData = test_data_dir();

// A model small enough for unit tests: `layers` blocks of `heads` heads, `width` wide.
inline GptConfig small_config(int64_t vocab, int64_t block, int64_t layers = 2, int64_t heads = 2, int64_t width = 32,
                              double dropout = 0.0) {
  GptConfig c;
  c.vocab_size = vocab;
  c.block_size = block;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_embd = width;
  c.dropout = dropout;
  return c;
}

// The message of the exception E that f throws, or a marker that it threw none.
template <typename E, typename F>
std::string exception_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return std::string("<no ") + (std::is_same_v<E, std::invalid_argument> ? "std::invalid_argument" : "exception") +
         " thrown>";
}
template <typename F>
std::string invalid_argument_message(F&& f) {
  return exception_message<std::invalid_argument>(std::forward<F>(f));
}

}  // namespace mygpt::testing
