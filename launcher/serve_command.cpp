// `mygpt-ddp serve`: an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/models,
// /health) and a chat page at / over a checkpoint or a Hugging Face folder, its tokenizer and chat format
// resolved as `chat` resolves them. Requests are decoded together by the inference engine (continuous
// batching: serving/batch_scheduler.h); the HTTP side is serving/http_server.h. docs/serving.md.
#include <boost/asio/ip/address.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "dataloader/chat_format.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"
#include "model/huge_page_weights.h"
#include "serving/http_server.h"

namespace mygpt {
namespace {

struct ServeFlags {
  std::optional<std::string> checkpoint;
  std::string host;
  int64_t port{};
  std::string api_key;
  std::string model_name;
  int64_t max_batch{};
  int64_t max_queue{};
  int64_t max_body_bytes{};
  int64_t max_prompt_tokens{};
  int64_t max_tokens{};
  double shutdown_grace{};
  uint64_t seed{};
  std::string device;
  std::optional<std::string> vocab;
  int64_t threads{};
};

constexpr const char* kApiKeyVariable = "MYGPT_API_KEY";

const OptionTable<ServeFlags>& serve_flag_table() {
  static const OptionTable<ServeFlags> table = [] {
    using S = ServeFlags;
    OptionTable<S> t;
    t.group("Serving");
    model_flag(t, &S::checkpoint);
    t.add("host", &S::host,
          "address to listen on; the default takes connections from this machine only (0.0.0.0: from anywhere, "
          "then set --api-key)")
        .init("127.0.0.1")
        .check([](const std::string& flag, const std::string& host) {
          boost::system::error_code ec;
          static_cast<void>(boost::asio::ip::make_address(host, ec));
          if (ec) throw std::invalid_argument("--" + flag + " '" + host + "' is not an IP address (" + ec.message() + ")");
        });
    t.add("port", &S::port, "TCP port (0: any free one, printed at start)")
        .init(8000)
        .check([](const std::string& flag, const int64_t& port) {
          if (port < 0 || port > 65535) {
            throw std::invalid_argument("--" + flag + " must be in 0..65535, got " + std::to_string(port));
          }
        });
    t.add("api-key", &S::api_key,
          std::string("require 'Authorization: Bearer KEY' on /v1/ (default: the ") + kApiKeyVariable +
              " environment variable; neither: no key)")
        .init("");
    t.add("model-name", &S::model_name,
          "the model id requests name and /v1/models lists (default: the --checkpoint path's last part)")
        .init("");
    t.add("max-batch", &S::max_batch, "requests decoded together at most (one forward pass per token for all)")
        .init(8)
        .check(positive);
    t.add("max-queue", &S::max_queue, "requests waiting for a place in the batch at most; more are refused with 429")
        .init(64)
        .check(non_negative);
    t.add("max-body-bytes", &S::max_body_bytes, "largest request body; larger ones are refused with 413")
        .init(1 << 20)
        .check(positive);
    t.add("max-prompt-tokens", &S::max_prompt_tokens,
          "longest prompt (a chat's rendered messages) in tokens; 0: the model's context less one")
        .init(0)
        .check(non_negative);
    t.add("max-tokens", &S::max_tokens,
          "longest reply in tokens: a request's max_tokens above it is refused; without one a reply runs to this "
          "or to the end of the model's context")
        .init(1024)
        .check(positive);
    t.add("shutdown-grace", &S::shutdown_grace,
          "seconds requests in flight get to finish after SIGTERM before they are cut")
        .init(10.0)
        .check(in_range(0, 3600, true));
    seed_flag(t, &S::seed);
    device_flag(t, &S::device);
    vocab_flag(t, &S::vocab);
    threads_flag(t, &S::threads);
    return t;
  }();
  return table;
}

std::string default_model_name(const std::string& checkpoint) {
  std::filesystem::path path(checkpoint);
  while (!path.empty() && path.filename().empty()) path = path.parent_path();  // "out/" names "out"
  const std::string name = path.filename().string();
  return name.empty() ? "mygpt" : name;
}

int run_serve(const Parsed<ServeFlags>& flags, const JobSession&) {
  const ServeFlags& f = flags.config;
  ServerOptions options;
  options.host = f.host;
  options.port = static_cast<uint16_t>(f.port);
  options.api_key = f.api_key;
  if (!flags.gave("api-key")) {
    if (const char* key = std::getenv(kApiKeyVariable)) options.api_key = key;
  }
  options.limits.max_body_bytes = f.max_body_bytes;
  options.limits.max_prompt_tokens = f.max_prompt_tokens;
  options.limits.max_tokens = f.max_tokens;
  options.max_batch = f.max_batch;
  options.max_queue = f.max_queue;
  options.shutdown_grace_s = f.shutdown_grace;

  const torch::Device device = pick_device(f.device);
  set_cpu_threads(f.threads);
  InferenceModel m = load_inference_model(*f.checkpoint, device, f.vocab.value_or(""));
  if (f.max_prompt_tokens >= m.model->config().block_size) {
    throw std::invalid_argument("--max-prompt-tokens " + std::to_string(f.max_prompt_tokens) + " leaves no room for a "
                                "reply in the model's context of " + std::to_string(m.model->config().block_size));
  }
  if (device.is_cpu()) static_cast<void>(move_weights_to_huge_pages(*m.model));
  // The chat format as `chat` resolves it: a model without rows for its tokens serves completions only.
  std::optional<ChatFormat> chat;
  std::string chat_note;
  try {
    chat.emplace(*m.codec, m.model->config().vocab_size);
    if (m.chat_record) {
      chat->check_record(*m.chat_record);
    } else if (!chat->tokenizer_has_tokens()) {
      chat_note = "not fine-tuned on conversations (train --sft): its chat replies will not follow the turns";
    }
  } catch (const std::invalid_argument& e) {
    if (m.chat_record) throw std::invalid_argument(m.description + ": " + e.what());
    chat.reset();
    chat_note = std::string("no chat format (") + e.what() + "): /v1/chat/completions is refused";
  }
  seed_everything(f.seed);  // requests without a seed draw from the default generator

  ServedModel served;
  served.model = m.model;
  served.codec = m.codec.get();
  served.chat = chat ? &*chat : nullptr;
  served.name = f.model_name.empty() ? default_model_name(*f.checkpoint) : f.model_name;
  served.token_count = m.token_count;
  // A chat model's chat tokens print as their names, as `generate` prints them (its tokenizer may lack them).
  const ChatFormat* names = m.chat_record && chat ? &*chat : nullptr;
  served.decode_id = [names, codec = m.codec.get()](int64_t id) {
    return names ? names->decode({id}) : codec->decode({id});
  };
  std::cerr << "device: " << device_name(device) << "\nmodel: " << m.description << " as '" << served.name << "'"
            << std::endl;
  if (!chat_note.empty()) std::cerr << "note: " << m.description << " " << chat_note << std::endl;
  if (options.api_key.empty() && f.host != "127.0.0.1" && f.host != "::1" && f.host != "localhost") {
    std::cerr << "note: listening on " << f.host << " without --api-key: anyone who reaches it can use the model"
              << std::endl;
  }
  serve_http(
      served, options,
      [](const std::string& address) {
        // One line on stdout, for scripts that start the server on --port 0.
        std::cout << "serving on " << address << " (chat page at " << address << "/)" << std::endl;
      },
      [](const std::string& line) { std::cerr << line << std::endl; });
  std::cerr << "stopped" << std::endl;
  return 0;
}

}  // namespace

Command serve_command() {
  return make_command<ServeFlags>("serve", "serve --checkpoint PATH [options]",
                                  "an OpenAI-compatible HTTP API and a chat page over a model", /*multi_rank=*/false,
                                  &serve_flag_table, &run_serve);
}

}  // namespace mygpt
