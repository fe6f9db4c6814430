#include "serving/batch_scheduler.h"

#include <algorithm>
#include <exception>

#include "inference/reply_text.h"

namespace mygpt {

BatchScheduler::BatchScheduler(Gpt model, std::function<std::string(int64_t)> decode_id, int64_t max_batch,
                               int64_t max_queue)
    : model_(std::move(model)),
      engine_(model_), decode_id_(std::move(decode_id)), max_batch_(max_batch), max_queue_(max_queue) {
  thread_ = std::thread([this] { run(); });
}

BatchScheduler::~BatchScheduler() {
  shut_down(std::chrono::milliseconds(0));
  thread_.join();
}

bool BatchScheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(mutex_);
    // A place in the batch (as of the scheduler's last look: one that just freed counts at its next step),
    // else in the queue.
    const int64_t places = max_queue_ + std::max<int64_t>(0, max_batch_ - decoding_);
    if (stopping_ || static_cast<int64_t>(waiting_.size()) >= places) return false;
    waiting_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void BatchScheduler::shut_down(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    if (!stopping_ || deadline < deadline_) deadline_ = deadline;
    stopping_ = true;
  }
  wake_.notify_one();
}

bool BatchScheduler::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

std::pair<int64_t, int64_t> BatchScheduler::load() const {
  std::lock_guard lock(mutex_);
  return {decoding_, static_cast<int64_t>(waiting_.size())};
}

void BatchScheduler::admit(std::vector<Active>& active) {
  std::unique_lock lock(mutex_);
  decoding_ = static_cast<int64_t>(active.size());
  wake_.wait(lock, [&] { return !active.empty() || !waiting_.empty() || stopping_; });
  while (static_cast<int64_t>(active.size()) < max_batch_ && !waiting_.empty()) {
    std::shared_ptr<Job> job = std::move(waiting_.front());
    waiting_.pop_front();
    Active a{job, Sequence(engine_.model(), job->settings), std::make_unique<ReplyText>(decode_id_, job->stop)};
    a.sequence.start_reply(job->prompt);
    active.push_back(std::move(a));
  }
  decoding_ = static_cast<int64_t>(active.size());
}

bool BatchScheduler::publish(Active& a, std::string text) {
  Sequence& s = a.sequence;
  std::string finish_reason;
  std::optional<ApiError> error;
  if (s.finished()) {
    switch (s.finish_reason()) {
      case FinishReason::end_id:
        finish_reason = "stop";
        break;
      case FinishReason::length:
      case FinishReason::context_full:
        finish_reason = "length";
        break;
      case FinishReason::non_finite_logits:
        error = ApiError(500, "the model produces non-finite logits (NaN or infinite): its weights diverged",
                         "server_error");
        break;
      case FinishReason::cancelled:
        if (a.text->stopped()) {
          finish_reason = "stop";
        } else {
          error = ApiError(503, "the server is shutting down: the reply was cut", "server_error");
        }
        break;
      case FinishReason::none:
        break;
    }
    if (!error && !a.text->stopped()) text += a.text->finish();
  }
  {
    std::lock_guard lock(a.job->mutex);
    a.job->text += text;
    a.job->completion_tokens = static_cast<int64_t>(s.reply().size());
    if (s.finished()) {
      a.job->done = true;
      a.job->finish_reason = finish_reason;
      a.job->error = error;
    }
  }
  if (a.job->notify) a.job->notify();
  return s.finished();
}

void BatchScheduler::run() {
  std::vector<Active> active;
  while (true) {
    admit(active);
    bool stopping = false;
    std::chrono::steady_clock::time_point deadline;
    {
      std::lock_guard lock(mutex_);
      stopping = stopping_;
      deadline = deadline_;
      if (stopping && std::chrono::steady_clock::now() >= deadline) {
        // Past the grace: what still waits or decodes is cut.
        for (auto& job : waiting_) {
          std::lock_guard job_lock(job->mutex);
          job->done = true;
          job->error = ApiError(503, "the server is shutting down", "server_error");
          if (job->notify) job->notify();
        }
        waiting_.clear();
        for (Active& a : active) a.sequence.cancel();
      }
      if (active.empty() && waiting_.empty() && stopping) {
        finished_ = true;
        return;
      }
    }
    // A client that went away leaves now: its place is free for the next step.
    for (Active& a : active) {
      if (a.job->cancelled.load()) a.sequence.cancel();
    }
    std::vector<Sequence*> step;
    std::vector<size_t> before;
    for (Active& a : active) {
      step.push_back(&a.sequence);
      before.push_back(a.sequence.reply().size());
    }
    try {
      engine_.step(step);
    } catch (const std::exception& e) {  // out of memory, a device fault: these requests fail, the server goes on
      for (Active& a : active) {
        {
          std::lock_guard lock(a.job->mutex);
          a.job->done = true;
          a.job->error = ApiError(500, std::string("decoding failed: ") + e.what(), "server_error");
        }
        if (a.job->notify) a.job->notify();
      }
      active.clear();
      continue;
    }
    std::vector<Active> still;
    for (size_t i = 0; i < active.size(); ++i) {
      Active& a = active[i];
      std::string text;
      const auto& reply = a.sequence.reply();
      if (reply.size() > before[i] && a.sequence.finish_reason() != FinishReason::end_id) {
        text = a.text->push(reply.back());
        if (a.text->stopped()) a.sequence.cancel();
      }
      if (!publish(a, std::move(text))) still.push_back(std::move(a));
    }
    active = std::move(still);
  }
}

}  // namespace mygpt
