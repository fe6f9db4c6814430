#pragma once
// Tokenizes batches of text pieces on several threads and hands the tokens back in the order the
// batches were given, so that the output is the same, byte for byte, whatever the number of threads.
// Each thread has a codec of its own (the GPT-2 tokenizer's cache lets one codec encode on one thread at
// a time). The caller bounds the memory: at most `pending()` batches are queued or done but not taken.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dataloader/document_reader.h"
#include "tokenizer/text_codec.h"

namespace mygpt {

class ParallelEncoder {
 public:
  // make_codec is called once per thread, on that thread. threads >= 1.
  ParallelEncoder(std::function<std::unique_ptr<TextCodec>()> make_codec, int threads);
  ~ParallelEncoder();
  ParallelEncoder(const ParallelEncoder&) = delete;
  ParallelEncoder& operator=(const ParallelEncoder&) = delete;

  void submit(std::vector<TextPiece> batch);
  // The tokens of the oldest batch not taken yet (<|endoftext|> before each piece that starts a document,
  // where the tokenizer has one), waiting for them; a worker's exception is rethrown here.
  std::vector<int32_t> take();
  std::size_t pending() const;

 private:
  struct Job {
    std::vector<TextPiece> batch;
    std::vector<int32_t> tokens;
    std::exception_ptr error;
    bool done = false;
  };
  void work(const std::function<std::unique_ptr<TextCodec>()>& make_codec);

  mutable std::mutex mutex_;
  std::condition_variable wake_workers_, wake_taker_;
  std::deque<std::shared_ptr<Job>> order_;  // every job not taken, oldest first
  std::deque<std::shared_ptr<Job>> todo_;   // jobs no worker has started
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// The tokens of a batch: <|endoftext|> (when the codec has one) before each piece that starts a document, and
// each piece's encode_ordinary (special tokens' text in a document is text).
std::vector<int32_t> encode_batch(const TextCodec& codec, const std::vector<TextPiece>& batch);

}  // namespace mygpt
