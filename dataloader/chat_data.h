#pragma once
// Conversations for supervised fine-tuning, read from JSON lines and rendered by the chat format.
//
// A line is one record, either a conversation in the OpenAI / Hugging Face / SmolTalk shape
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
// (an assistant message may carry OpenAI's "weight": 0 or 1; 0 keeps it as context, not trained on),
// or a prompt-completion pair (TRL's shape), trained as one user turn and one assistant reply:
//   {"prompt": "...", "completion": "..."}
// A record with both shapes is bad (which one it means cannot be told).
// Blank lines are skipped. A bad record (not UTF-8, bad JSON, not an object, neither shape, an unknown
// role, turns out of order, no assistant turn, a message with empty content, an empty reply, a last turn
// the user's) is a std::invalid_argument "FILE:LINE: problem", or, with
// skip_bad_records, skipped and counted.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dataloader/chat_format.h"

namespace mygpt {

// One record's messages; throws std::invalid_argument with the problem (without file and line).
std::vector<ChatMessage> parse_chat_record(std::string_view line);

struct ChatExamples {
  std::vector<RenderedChat> conversations;  // rendered whole
  int64_t records = 0;                      // records read (bad ones included)
  int64_t bad_skipped = 0;                  // bad records skipped (skip_bad_records)
};

// Reads and renders every record of the file. A file without one good record is std::invalid_argument.
ChatExamples read_chat_examples(const std::filesystem::path& path, const ChatFormat& format, bool skip_bad_records);

// Conversations cut to the rows of a run.
struct BlockConversations {
  // At most max_tokens ids each; every one trains at least one token.
  std::vector<RenderedChat> conversations;
  int64_t cut = 0;           // longer than max_tokens: their ends are not trained on
  int64_t nothing_left = 0;  // cut before any assistant token: left out, nothing to learn from them
  // The note a run prints about what was cut or left out (empty when nothing was); `what` names the data.
  std::string note(const std::string& what, int64_t seq_len) const;
};
// max_tokens: a row's inputs and its last target (--seq-len + 1).
BlockConversations cut_to_block(const std::vector<RenderedChat>& conversations, int64_t max_tokens);
// How many conversations cut_to_block keeps (a trained token within max_tokens), counted without copies.
size_t conversations_kept(const std::vector<RenderedChat>& conversations, int64_t max_tokens);

}  // namespace mygpt
