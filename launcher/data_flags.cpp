// The Data group of train's options: what a run reads, and how.
#include "launcher/train_flag_groups.h"

#include "launcher/shared_flags.h"

namespace mygpt {

void add_data_flags(OptionTable<TrainFlags>& t) {
  using F = TrainFlags;
  using D = DataOptions;
  // Judged on the data options the run resolves (run_plan): --tokenizer as the --vocab folder says it.
  const auto sft = [](const Parsed<TrainFlags>& run) { return run.config.data.sft; };
  const auto text = [](const Parsed<TrainFlags>& run) {
    return !run.config.data.sft && !is_token_data(run.config.data.data);
  };
  const auto tokens = [](const Parsed<TrainFlags>& run) {
    return !run.config.data.sft && is_token_data(run.config.data.data);
  };
  t.group(std::string(kDataGroup));
  t.add("data", &F::data, &D::data,
        "training data (also the first positional argument): builtin:sort (generated offline), a UTF-8 text "
        "file, a token file (llm.c .bin, .npy uint16, raw uint16), a folder of shards or a glob")
      .init("builtin:sort")
      .read_by(kPlanCommand);
  t.positional("data", 1);
  t.add("val-data", &F::data, &D::val_data, "validation token data; a shard folder's *val* files otherwise")
      .read_by(kPlanCommand)
      .refused_with({"data", "sft"}, text, "with text data (validation is the last --val-fraction of the text)");
  t.add("tokenizer", &F::data, &D::tokenizer,
        "tokenizer of text data; when not given: the BPE of --vocab's folder (or of --init-from's), hf where it "
        "has a tokenizer.json and gpt2 where it has GPT-2's files, "
        "else char")
      .names({{"char", TokenizerKind::character}, {"gpt2", TokenizerKind::gpt2}, {"hf", TokenizerKind::hf}})
      .init(TokenizerKind::character)
      .read_by(kPlanCommand)
      .refused_with({"data", "sft"}, tokens, "with token data (it tokenizes text)");
  vocab_flag(t, &F::data, &D::vocab).read_by(kPlanCommand)
      .refused_with({"data", "sft", "tokenizer"},
                    [text](const Parsed<TrainFlags>& run) {
                      return text(run) && run.config.data.tokenizer == TokenizerKind::character;
                    },
                    "with --tokenizer char (it is a BPE tokenizer's folder)");
  t.add("vocab-size", &F::data, &D::vocab_size,
        "model vocabulary of token data (unset: GPT-2's 50304, or the char_vocab.txt beside the shards)")
      .check(positive)
      .read_by(kPlanCommand)
      .refused_with({"sft"}, sft, "with --sft (the tokenizer and its chat tokens set the vocabulary)")
      .refused_with({"data", "sft"}, text, "with text data (the tokenizer sets the vocabulary)");
  t.add("val-fraction", &F::data, &D::val_fraction, "share of a text used for validation (its end)")
      .init(0.1)
      .check(in_range(0, 1, /*hi_inclusive=*/false))
      .read_by(kPlanCommand)
      .refused_with({"sft", "val-data"},
                    [](const Parsed<TrainFlags>& run) { return run.config.data.sft && run.gave("val-data"); },
                    "with --val-data (the held-out conversations)")
      .refused_with({"data", "sft"}, tokens,
                    "with token data (validation comes from --val-data or a shard folder's *val* files)");
  t.add("data-order", &F::data, &D::data_order,
        "auto: shuffled when the run reads its training data more than once, else sequential; sequential: "
        "consecutive chunks sharded across ranks; shuffled: rows of --seq-len tokens in a fresh order each epoch "
        "(from --seed), sharded likewise; random: random offsets per rank (nanoGPT's get_batch)")
      .names({{"auto", DataOrder::automatic},
              {"sequential", DataOrder::sequential},
              {"shuffled", DataOrder::shuffled},
              {"random", DataOrder::random}})
      .init(DataOrder::automatic);
  t.add("packing", &F::data, &D::packing,
        "rows: consecutive --seq-len tokens wherever they fall in the documents (--data-order); best-fit: every row "
        "starts at a document's first token (the tokenizer's BOS / <|endoftext|> that prepare writes), documents "
        "placed best-fit into rows and what does not fit cropped (nanochat's packing; documents read in order; the "
        "share cropped is printed); validation keeps rows")
      .names({{"rows", Packing::rows}, {"best-fit", Packing::best_fit}})
      .init(Packing::rows);
  t.add("sft", &F::data, &D::sft,
        "supervised fine-tuning: DATA (and --val-data) are conversations in JSON lines ({\"messages\": [{\"role\": "
        "\"system\"|\"user\"|\"assistant\", \"content\": ...}]} or {\"prompt\": ..., \"completion\": ...}); the "
        "loss is the mean over the assistant's tokens of each step")
      .init(false)
      .read_by(kPlanCommand);
  t.add("skip-bad-records", &F::data, &D::skip_bad_records,
        "with --sft: skip bad records (counted in one note) instead of stopping at the first")
      .init(false)
      .only_with("sft", sft, "without --sft (it skips bad conversations)");
  t.add("hellaswag", &F::data, &D::hellaswag,
        "HellaSwag file (official jsonl or llama.cpp's 6-line text); needs --vocab");
  t.add("core", &F::data, &D::core,
        "nanochat's CORE metric during training, over an unzipped eval bundle (core.yaml, eval_meta_data.csv, "
        "eval_data/); needs a tokenizer");
}

}  // namespace mygpt
