// `mygpt-ddp chat`: talks with a model fine-tuned on conversations (`train --sft`), in the chat format
// it was trained on (dataloader/chat_format.h). On a terminal: a conversation, the reply streamed as it
// is written, the KV cache kept from turn to turn; Ctrl-C stops a reply, Ctrl-D (or "quit") ends,
// "clear" starts a new conversation. With stdin not a terminal (a pipe, a file): each input line is a
// conversation of its own, one user message, and its reply is one output line, so scripts can drive it.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/file_io.h"
#include "common/strprintf.h"
#include "dataloader/chat_format.h"
#include "launcher/chat_session.h"
#include "launcher/commands.h"
#include "launcher/device.h"
#include "launcher/device_probe.h"
#include "launcher/inference_model.h"
#include "launcher/shared_flags.h"

namespace mygpt {
namespace {

struct ChatFlags {
  std::optional<std::string> checkpoint;
  std::string system;
  int64_t max_new_tokens{};
  double temperature{};
  int64_t top_k{};
  uint64_t seed{};
  std::string device;
  std::optional<std::string> vocab;
  int64_t threads{};
};

const OptionTable<ChatFlags>& chat_flag_table() {
  static const OptionTable<ChatFlags> table = [] {
    using C = ChatFlags;
    OptionTable<C> t;
    t.group("Chat");
    model_flag(t, &C::checkpoint);
    t.add("system", &C::system, "a system message, put before the first user message of each conversation")
        .init("")
        .check(utf8_text);
    t.add("max-new-tokens", &C::max_new_tokens, "longest reply, in tokens").init(512).check(positive);
    // nanochat's chat defaults: a little randomness keeps replies from looping, top-k cuts the long tail.
    temperature_flag(t, &C::temperature).init(0.6);
    top_k_flag(t, &C::top_k).init(50);
    seed_flag(t, &C::seed);
    device_flag(t, &C::device);
    vocab_flag(t, &C::vocab);
    threads_flag(t, &C::threads);
    return t;
  }();
  return table;
}

// Raised by Ctrl-C; the reply in progress polls it. Installed without SA_RESTART, so that Ctrl-C at
// the prompt also interrupts the read (which then starts over) instead of waiting for Enter.
std::atomic<bool> interrupted{false};

void on_interrupt(int) { interrupted.store(true); }

void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
}

// A reply on one line: its line breaks and backslashes escaped as \n, \r and \\ (a script splits the
// output on lines; reading the escapes back gives the text).
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}

std::string context_note(const ChatSession& session) {
  return strprintf("the conversation has outgrown the model's context of %lld tokens",
                   static_cast<long long>(session.context_size()));
}

// Non-interactive: one conversation per input line, one reply per output line, notes on stderr. A line
// that cannot be answered (not UTF-8, longer than the context) gets one error line on stderr naming it and
// an empty line on stdout, and the lines after it are answered: a script reading line for line stays in
// step. The exit status then says that some line went unanswered (2, bad input).
int run_lines(ChatSession& session) {
  std::string line;
  int64_t unanswered = 0;
  for (int64_t number = 1; std::getline(std::cin, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    const std::string where = strprintf("stdin line %lld", static_cast<long long>(number));
    session.reset();
    ChatReply reply;
    try {
      require_utf8(line, where);  // names the line itself
      try {
        reply = session.reply(line);
      } catch (const ConversationFull& e) {
        throw std::invalid_argument(where + ": " + e.what());
      } catch (const std::invalid_argument& e) {  // a character the tokenizer cannot encode
        throw std::invalid_argument(where + ": " + e.what());
      }
    } catch (const std::invalid_argument& e) {
      std::cerr << "mygpt-ddp: error: " << e.what() << "; its reply line is left empty" << std::endl;
      ++unanswered;
    }
    std::cout << one_line(reply.text) << '\n';
    check_standard_output();
    if (reply.outgrew) {
      std::cerr << strprintf("note: %s: %s; the reply is cut there", where.c_str(), context_note(session).c_str())
                << std::endl;
    }
  }
  std::cout << std::flush;
  check_standard_output();
  return unanswered > 0 ? 2 : 0;  // 2: bad input, main's code for it
}

// Interactive: one conversation, turn after turn.
int run_terminal(ChatSession& session, const std::string& description, int64_t max_new_tokens) {
  catch_interrupts();
  std::cout << "chat with " << description << "\n(Ctrl-D or \"quit\" ends, Ctrl-C stops a reply, \"clear\" starts a "
            << "new conversation)" << std::endl;
  while (true) {
    std::cout << "\nUser: " << std::flush;
    std::string line;
    interrupted.store(false);
    if (!std::getline(std::cin, line)) {
      if (std::cin.eof()) break;  // Ctrl-D
      std::cin.clear();           // Ctrl-C at the prompt: a fresh prompt
      continue;
    }
    if (line == "quit" || line == "exit") break;
    if (line == "clear") {
      session.reset();
      std::cout << "(a new conversation)" << std::endl;
      continue;
    }
    if (line.empty()) continue;
    try {
      require_utf8(line, "the message");
      // Decided before the reply's label is printed: a message that fits in no conversation keeps the one
      // there is; one that fits only in a new conversation starts it.
      if (!session.fits(line)) {
        const int64_t alone = session.tokens_needed(line, /*in_new_conversation=*/true);
        if (alone > session.context_size()) {
          std::cout << strprintf("(the message does not fit even in a new conversation: it needs %lld tokens of the "
                                 "model's context of %lld, one for the reply included; the conversation goes on)",
                                 static_cast<long long>(alone), static_cast<long long>(session.context_size()))
                    << std::endl;
          continue;
        }
        std::cout << "(" << context_note(session) << ": a new conversation starts with this message)" << std::endl;
        session.reset();
      }
      std::cout << "\nAssistant: " << std::flush;
      const ChatReply reply =
          session.reply(line, [](const std::string& text) { std::cout << text << std::flush; }, &interrupted);
      std::cout << std::endl;
      if (reply.interrupted) std::cout << "(stopped)" << std::endl;
      if (!reply.finished && !reply.interrupted && !reply.outgrew) {
        std::cout << "(cut at --max-new-tokens " << max_new_tokens << ")" << std::endl;
      }
      if (reply.outgrew) {
        std::cout << "(" << context_note(session) << ": the next message starts a new one)" << std::endl;
        session.reset();
      }
    } catch (const std::invalid_argument& e) {  // text the tokenizer cannot encode: say so, keep talking
      std::cout << "(" << e.what() << ")" << std::endl;
    }
  }
  std::cout << std::endl;
  return 0;
}

int run_chat(const Parsed<ChatFlags>& flags, const JobSession&) {
  const ChatFlags& f = flags.config;
  refuse_top_k_when_greedy(flags, f.temperature, f.top_k);
  const bool terminal = isatty(STDIN_FILENO) != 0;
  const torch::Device device = pick_device(f.device);
  set_cpu_threads(f.threads);
  InferenceModel m = load_inference_model(*f.checkpoint, device, f.vocab.value_or(""));
  const ChatFormat format = [&] {
    try {
      return ChatFormat(*m.codec, m.model->config().vocab_size);
    } catch (const std::invalid_argument& e) {  // which model lacks the rows
      throw std::invalid_argument(m.description + ": " + e.what());
    }
  }();
  if (!m.chat_record && format.tokenizer_has_tokens()) {
    // nanochat's own tokenizer: its chat tokens are there and may well be trained, but nothing says the
    // turns were rendered as ours are.
    std::cerr << "note: " << m.description << " records no chat template; its tokenizer's own chat tokens are used, "
              << "in nanochat's rendering" << std::endl;
  } else if (!m.chat_record) {
    // Still usable (its special tokens are there), but it never learned to end a turn: say why replies ramble.
    std::cerr << "note: " << m.description << " was not fine-tuned on conversations (train --sft): its replies will "
              << "not follow the turns" << std::endl;
  } else {
    format.check_record(*m.chat_record);
  }
  const SamplingOptions sampling{f.max_new_tokens, f.temperature, f.top_k};
  seed_everything(f.seed);
  ChatSession session(m.model, format, *m.codec, sampling, f.system);
  if (!f.system.empty()) {
    // A system message that leaves no room for any message is the option's fault, not each message's.
    const int64_t with_system = session.tokens_needed("", /*in_new_conversation=*/true);
    if (with_system >= session.context_size()) {
      throw std::invalid_argument(strprintf("--system takes %lld of the model's %lld context tokens (with the chat "
                                            "tokens and one for the reply), leaving none for a message",
                                            static_cast<long long>(with_system),
                                            static_cast<long long>(session.context_size())));
    }
  }
  try {
    if (terminal) {
      std::cerr << "device: " << device_name(device) << "\nmodel: " << m.description << std::endl;
      return run_terminal(session, m.description, f.max_new_tokens);
    }
    return run_lines(session);
  } catch (const NonFiniteLogits& e) {  // the stored weights are the problem: bad input
    throw std::invalid_argument(m.description + ": " + e.what());
  }
}

}  // namespace

Command chat_command() {
  return make_command<ChatFlags>("chat", "chat --checkpoint PATH [options]",
                                 "talk with a model fine-tuned on conversations (stdin lines when not a terminal)",
                                 /*multi_rank=*/false, &chat_flag_table, &run_chat);
}

}  // namespace mygpt
