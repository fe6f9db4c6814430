#pragma once
// The requests a server decodes together: one thread owns the model and the inference engine
// (inference/engine.h), and at each step admits waiting requests (up to --max-batch decoding at once), draws
// one token for every one of them in one engine step, turns the tokens into text (stop strings included)
// and hands each request its news. A request joins at the next step and leaves as soon as it is done
// or its client is gone: nobody waits for a batch to fill or to drain.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "inference/engine.h"
#include "inference/reply_text.h"
#include "serving/api_error.h"

namespace mygpt {

// One request's generation, shared by the HTTP session that answers it and the scheduler that decodes it.
struct Job {
  // Set before submit().
  std::vector<int64_t> prompt;
  SequenceSettings settings;
  std::vector<std::string> stop;
  // Called by the scheduler's thread after it put news below (the session posts itself a look at them).
  std::function<void()> notify;

  // Raised by the session when its client is gone: the scheduler drops the request at its next step.
  std::atomic<bool> cancelled{false};

  // The news, under mutex.
  std::mutex mutex;
  std::string text;  // reply text not taken by the session yet
  int64_t completion_tokens = 0;
  bool done = false;
  std::string finish_reason;    // "stop" or "length", once done without error
  std::optional<ApiError> error;  // once done with one (the server is shutting down, the model failed)
};

class BatchScheduler {
 public:
  // decode_id: one id's text bytes. The model (eval mode) is used from the scheduler's thread only.
  BatchScheduler(Gpt model, std::function<std::string(int64_t)> decode_id, int64_t max_batch, int64_t max_queue);
  ~BatchScheduler();

  // Queues a job; false when the batch is full and max_queue jobs already wait, or the scheduler is
  // shutting down (the caller answers 429 / 503 at once).
  bool submit(std::shared_ptr<Job> job);
  // Takes no more jobs; those waiting or decoding go on until `grace` has passed, then they end with a
  // server_error. Returns at once; finished() says when all are done.
  void shut_down(std::chrono::milliseconds grace);
  bool finished() const;
  // Jobs decoding and waiting, now.
  std::pair<int64_t, int64_t> load() const;

 private:
  struct Active {
    std::shared_ptr<Job> job;
    Sequence sequence;
    std::unique_ptr<ReplyText> text;
  };
  void run();
  void admit(std::vector<Active>& active);
  // Publishes `active`'s new text and, when it is done, its end; true when it is done.
  bool publish(Active& a, std::string text);

  Gpt model_;  // shares the caller's module (a holder): kept here for the engine
  Engine engine_;
  std::function<std::string(int64_t)> decode_id_;
  const int64_t max_batch_, max_queue_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> waiting_;
  int64_t decoding_ = 0;
  bool stopping_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  std::thread thread_;
};

}  // namespace mygpt
