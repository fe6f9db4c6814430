#include "dataloader/parallel_encoder.h"

namespace mygpt {

std::vector<int32_t> encode_batch(const TextCodec& codec, const std::vector<TextPiece>& batch) {
  std::vector<int32_t> tokens;
  for (const TextPiece& piece : batch) {
    if (piece.starts_document && codec.end_of_text() >= 0) tokens.push_back(static_cast<int32_t>(codec.end_of_text()));
    // A document's text is text: a literal <|endoftext|> (or <|bos|>) in it is characters, never a delimiter
    // (llm.c's and nanochat's encode_ordinary); the delimiters are the ones pushed here.
    const auto ids =
        piece.json_line.empty() ? codec.encode_ordinary(piece.text) : codec.encode_ordinary(text_of(piece));
    for (int64_t id : ids) tokens.push_back(static_cast<int32_t>(id));
  }
  return tokens;
}

ParallelEncoder::ParallelEncoder(std::function<std::unique_ptr<TextCodec>()> make_codec, int threads) {
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this, make_codec] { work(make_codec); });
}

ParallelEncoder::~ParallelEncoder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_workers_.notify_all();
  for (auto& w : workers_) w.join();
}

void ParallelEncoder::submit(std::vector<TextPiece> batch) {
  auto job = std::make_shared<Job>();
  job->batch = std::move(batch);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    order_.push_back(job);
    todo_.push_back(job);
  }
  wake_workers_.notify_one();
}

std::vector<int32_t> ParallelEncoder::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (order_.empty()) return {};
  const std::shared_ptr<Job> job = order_.front();
  wake_taker_.wait(lock, [&] { return job->done; });
  order_.pop_front();
  if (job->error) std::rethrow_exception(job->error);
  return std::move(job->tokens);
}

std::size_t ParallelEncoder::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return order_.size();
}

void ParallelEncoder::work(const std::function<std::unique_ptr<TextCodec>()>& make_codec) {
  std::unique_ptr<TextCodec> codec;
  std::exception_ptr codec_error;
  try {
    codec = make_codec();
  } catch (...) {
    codec_error = std::current_exception();  // reported with the first batch this thread takes
  }
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_workers_.wait(lock, [&] { return stopping_ || !todo_.empty(); });
      if (stopping_) return;  // what is left is abandoned: the taker has gone (an error, the end)
      job = todo_.front();
      todo_.pop_front();
    }
    std::vector<int32_t> tokens;
    std::exception_ptr error = codec_error;
    if (!error) {
      try {
        tokens = encode_batch(*codec, job->batch);
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job->tokens = std::move(tokens);
      job->error = error;
      job->batch.clear();
      job->done = true;
    }
    wake_taker_.notify_all();
  }
}

}  // namespace mygpt
