#include "inference/reply_text.h"

#include <algorithm>
#include <stdexcept>

namespace mygpt {

ReplyText::ReplyText(std::function<std::string(int64_t)> decode, std::vector<std::string> stops)
    : decode_(std::move(decode)), stops_(std::move(stops)) {
  for (const auto& stop : stops_) {
    if (stop.empty()) throw std::invalid_argument("a stop string must not be empty");
  }
}

std::string ReplyText::push(int64_t id) {
  if (stopped_) return {};
  held_ += utf8_.push(decode_(id));
  return settle(/*end=*/false);
}

std::string ReplyText::finish() {
  if (stopped_) return {};
  held_ += utf8_.finish();
  return settle(/*end=*/true);
}

std::string ReplyText::settle(bool end) {
  // Everything before held_ was shown and holds no start of a stop string, so a stop string that
  // appears starts inside held_: the first one found ends the reply.
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string shown = held_.substr(0, first);
    held_.clear();
    return shown;
  }
  // Keep back the longest end of held_ that is the start of some stop string.
  size_t keep = 0;
  if (!end) {
    for (const auto& stop : stops_) {
      for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
        if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
  }
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

}  // namespace mygpt
