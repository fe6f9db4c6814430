# shellcheck shell=bash
# write_conversations FILE COUNT SEED: COUNT conversations of different lengths (a "reverse" task asked
# and answered in chat form), in both record shapes, some with a system prompt and some of two turns,
# so that micro-batches and ranks hold different numbers of assistant tokens. Plain awk: no Python.
write_conversations() {
  awk -v count="$2" -v seed="$3" 'BEGIN {
    srand(seed)
    for (i = 0; i < count; i++) {
      n = 1 + int(rand() * 9); word = ""; reversed = ""
      for (j = 0; j < n; j++) { c = sprintf("%c", 97 + int(rand() * 26)); word = word c; reversed = c reversed }
      if (i % 4 == 0) {
        printf "{\"prompt\":\"reverse %s\",\"completion\":\"%s\"}\n", word, reversed
      } else if (i % 4 == 1) {
        printf "{\"messages\":[{\"role\":\"system\",\"content\":\"You reverse words.\"},{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\",\"content\":\"%s\"}]}\n", word, reversed
      } else if (i % 4 == 2) {
        printf "{\"messages\":[{\"role\":\"user\",\"content\":\"reverse %s\"},{\"role\":\"assistant\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"and again\"},{\"role\":\"assistant\",\"content\":\"%s\"}]}\n", word, reversed, reversed
      } else {
        printf "{\"messages\":[{\"role\":\"user\",\"content\":\"please reverse the word %s for me\"},{\"role\":\"assistant\",\"content\":\"Sure: %s\"}]}\n", word, reversed
      }
    }
  }' >"$1"
}
