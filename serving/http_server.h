#pragma once
// `serve`'s HTTP side, on Boost.Beast over one Asio thread (the model decodes on the scheduler's own):
//   GET  /                      the chat page (serving/chat_page.html, compiled in)
//   GET  /health                {"status": "ok"}
//   GET  /v1/models             the one model served
//   POST /v1/chat/completions   OpenAI's chat completions, whole or streamed as server-sent events
//   POST /v1/completions        OpenAI's (legacy) completions, for base models
// Every refusal is OpenAI's error object with its HTTP status, and the server goes on. SIGTERM or SIGINT
// stops it: no new connection is taken, requests in flight finish (or are cut after the grace), and
// serve_http returns.
#include <cstdint>
#include <functional>
#include <string>

#include "serving/completion_job.h"

namespace mygpt {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (the one bound is reported)
  std::string api_key;   // not empty: /v1/ requires "Authorization: Bearer <key>"
  RequestLimits limits;
  int64_t max_batch = 8;   // requests decoded together
  int64_t max_queue = 64;  // requests waiting for a place in the batch; more get 429 at once
  double shutdown_grace_s = 10;  // after SIGTERM, how long requests in flight may take before they are cut
  double idle_timeout_s = 60;    // a connection that sends no (whole) request that long is closed
  double write_timeout_s = 60;   // a client that reads nothing of its reply that long is dropped
};

// Serves `served` until SIGTERM or SIGINT. `on_listening` is called with the address bound (e.g.
// "http://127.0.0.1:8000") before the first request is taken. Returns once every request is answered or
// cut. Throws std::invalid_argument naming --host or --port when the address cannot be bound.
void serve_http(const ServedModel& served, const ServerOptions& options,
                const std::function<void(const std::string& address)>& on_listening,
                const std::function<void(const std::string& line)>& log);

}  // namespace mygpt
