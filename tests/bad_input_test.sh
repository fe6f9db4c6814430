#!/usr/bin/env bash
# Bad input across every command and --config, as a hostile user would give it. Each case must end
# with exit 2 and one stderr line that names the file or option (the regex) and no crash, and a failed
# train/prepare must leave no checkpoint or shard behind.
# Usage: bad_input_test.sh MYGPT_DDP   (every input is made here; nothing from ../shared is needed)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_binary "${1:-}"
make_work_dir bad_input
cd "$WORK" || exit 1
RUN_TIMEOUT=60  # lib.sh: a case that runs longer is a hang
CPU=(--device cpu)
TINY=(--preset tiny --batch-size 2 --seq-len 16 --steps 2 --eval-every 0 "${CPU[@]}")

# A crash, a hang (timeout: 124) or library text instead of our one line fails the case too.
crash_free() {
  local name=$1
  if [[ $RC -ge 124 ]] || grep -qE "terminate called|Segmentation|Aborted|core dumped|Exception raised from|stack trace|what\(\):" "$WORK/$name.err"; then
    fail "$name" "crash signature (exit $RC): $(head -c 300 "$WORK/$name.err")"
    return 1
  fi
}
# bad NAME REGEX ARGS...: the case (stderr must match REGEX; output folders are checked for leftovers).
# An --out that did not exist before a refused command must not exist after it (issue 40: 25 kinds of
# refused train runs left an empty folder, which reads as a run that started).
bad() {
  local name=$1 pattern=$2
  shift 2
  local out="" previous="" arg
  for arg in "$@"; do [[ $previous == --out ]] && out=$arg; previous=$arg; done
  local fresh=0
  [[ -n $out && ! -e $out ]] && fresh=1
  expect_bad_input "$name" "$pattern" "$WORK/out_$name" "$@" && crash_free "$name"
  if [[ $fresh -eq 1 && -e $out ]]; then fail "$name: the refused command left --out '$out' behind"; fi
}

# --- inputs -----------------------------------------------------------------------------------------
python3 - <<'PY'
import json, struct
def llmc(path, ids, magic=20240520, version=1, count=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", magic, version, len(ids) if count is None else count, *([0] * 253)))
        f.write(struct.pack(f"<{len(ids)}H", *ids))
ids = [(i * 31 + 7) % 60 for i in range(2000)]
llmc("good.bin", ids)
llmc("zero_magic.bin", ids, magic=0)
llmc("bad_version.bin", ids, version=7)
llmc("count_too_big.bin", ids, count=999999)
llmc("negative_count.bin", ids, count=-5)
llmc("llama3.bin", ids, magic=20240801)
open("raw.bin", "wb").write(struct.pack(f"<{len(ids)}H", *ids))
llmc("out_of_range.bin", [70000 % 65536] + ids)
open("header_only.bin", "wb").write(struct.pack("<100i", 20240520, 1, 5, *([0] * 97)))
open("odd_raw.bin", "wb").write(b"\x01\x02\x03")
open("even_text.dat", "wb").write(b"ab" * 600)
open("bad_magic.npy", "wb").write(b"NOTNUMPY" + b"\x00" * 100)
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }"
hdr = hdr + " " * (64 - 10 - len(hdr) - 1) + "\n"
open("float.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + b"\x00" * 40)
open("text.txt", "w").write("the quick brown fox jumps over the lazy dog.\n" * 100)
open("text_named.bin", "w").write("the quick brown fox jumps over the lazy dog.\n" * 100)
open("short.txt", "w").write("tiny\n")
open("binary.txt", "wb").write(b"\xff\xfe\x00\x80" * 300)
open("hs_bad.jsonl", "w").write('{"ctx": "a", "endings": ["b"]}\nnot json\n')
open("hs_empty.jsonl", "w").write("")
open("docs_notext.jsonl", "w").write('{"text": "fine"}\n{"body": "no text"}\n')
open("docs_badjson.jsonl", "w").write('{"text": "fine"}\n{"text": \n')
# A byte-level BPE tokenizer.json whose vocab is empty: tokenizers loads it and tokenizes any text to nothing.
import os
os.makedirs("tok_empty_vocab", exist_ok=True)
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {}, "merges": []}},
          open("tok_empty_vocab/tokenizer.json", "w"))
open("cfg_unknown.cfg", "w").write("bogus-option = 3\n")
open("cfg_badvalue.cfg", "w").write("steps = many\n")
open("cfg_negative.cfg", "w").write("lr = -1\n")
open("cfg_garbage.cfg", "wb").write(b"\x00\x01\x02=\xff\n[[[\n")
open("cfg_nanogpt.py", "w").write("out_dir = 'out-shakespeare-char'\neval_interval = 250 # keep frequent\n"
                                  "always_save_checkpoint = False\nwandb_log = False\nn_layer = 6\n")
PY
mkdir -p shards_text shards_val_only empty_dir vocab_missing vocab_bad hf_relu hf_noweights hf_badweights mixed
cp good.bin shards_val_only/val_000000.bin
cp text_named.bin shards_text/train_000000.bin
cp good.bin mixed/a.bin && cp raw.bin mixed/b.bin
printf '{"a": 1' >vocab_bad/encoder.json && printf '#version: 0.2\n' >vocab_bad/vocab.bpe
printf '{"model_type": "gpt2", "activation_function": "relu", "n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 64, "vocab_size": 100}\n' >hf_relu/config.json
touch hf_relu/model.safetensors
printf '{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 64, "vocab_size": 100}\n' >hf_noweights/config.json
cp hf_noweights/config.json hf_badweights/config.json && printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a": 1}' >hf_badweights/model.safetensors
mkfifo fifo
printf 'not a folder' >a_file
# A real checkpoint, and damaged copies of it.
run make_ckpt train text.txt "${TINY[@]}" --out ckpt
CKPT=ckpt/ckpt_00000002.safetensors
if [[ $RC -ne 0 || ! -f $CKPT ]]; then
  fail "a checkpoint to damage" "exit $RC: $(tail -c 300 "$WORK/make_ckpt.err")"
  finish
fi
size=$(file_size "$CKPT")
head -c $((size / 2)) "$CKPT" >truncated.safetensors
head -c 5000 /dev/urandom >random.safetensors
# One byte of a tensor's data changed: of the weights (flipped), which every command reads, or of the
# optimizer's state (optimizer_flipped), which only a resume reads. The checksums must catch both.
python3 - "$CKPT" <<'PY'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
header_size = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + header_size])
for out, tensor in (("flipped.safetensors", "model.wte.weight"), ("optimizer_flipped.safetensors", "optimizer.exp_avg.0.0")):
    damaged = bytearray(data)
    begin = 8 + header_size + header[tensor]["data_offsets"][0]
    damaged[begin + 3] ^= 0x40
    open(out, "wb").write(damaged)
PY
: >empty.safetensors

# --- train: data --------------------------------------------------------------------------------
bad train_missing_data "data file 'nope.txt' does not exist" train nope.txt "${TINY[@]}" --out out_train_missing_data
bad train_fifo_data "'fifo' is not a regular file" train fifo "${TINY[@]}" --out out_train_fifo_data
bad train_dev_zero "'/dev/zero' is not a regular file" train /dev/zero "${TINY[@]}" --out out_train_dev_zero
bad train_empty_dir "empty_dir.*no token files" train empty_dir "${TINY[@]}" --vocab-size 64 --out out_train_empty_dir
bad train_short_text "fewer than one batch" train short.txt "${TINY[@]}" --out out_train_short_text
# --cuda-graph where no CUDA graph can be captured (trainer/cuda_graph_step.h; its other refusals: test_cuda_graph.cpp).
bad train_cuda_graph_cpu "--cuda-graph: .*(--device cpu|CPU LibTorch)" train builtin:sort "${TINY[@]}" --cuda-graph true \
  --out out_train_cuda_graph_cpu
bad train_zero_magic "zero_magic.bin.*damaged magic" train zero_magic.bin "${TINY[@]}" --vocab-size 64 --out out_train_zero_magic
bad train_bad_version "bad_version.bin.*version 7" train bad_version.bin "${TINY[@]}" --vocab-size 64 --out out_train_bad_version
bad train_count_too_big "count_too_big.bin.*truncated" train count_too_big.bin "${TINY[@]}" --vocab-size 64 --out out_train_count_too_big
bad train_negative_count "negative_count.bin.*negative" train negative_count.bin "${TINY[@]}" --vocab-size 64 --out out_train_negative_count
bad train_llama3 "llama3.bin.*LLaMA-3" train llama3.bin "${TINY[@]}" --vocab-size 64 --out out_train_llama3
bad train_out_of_range "out_of_range.bin.*not below vocab_size" train out_of_range.bin "${TINY[@]}" --vocab-size 64 --out out_train_out_of_range
bad train_header_only "header_only.bin" train header_only.bin "${TINY[@]}" --vocab-size 64 --out out_train_header_only
bad train_odd_raw "odd_raw.bin.*odd size" train odd_raw.bin "${TINY[@]}" --vocab-size 64 --out out_train_odd_raw
# Text under a token file's name trained as raw uint16 (loss 10.8, exit 0) before it was recognized.
# A model no machine holds (7e11 parameters, under the 2^40 cap) allocated for half a minute and died in
# the allocator or by the OOM killer; it is refused before anything is allocated.
bad train_too_big "needs about [0-9.]+ GiB per rank.*(MemAvailable|cgroup)" train text.txt "${TINY[@]}" --n-layer 100000 \
  --n-embd 768 --n-head 12 --out out_train_too_big
bad train_text_bin "text_named.bin.*printable UTF-8 text" train text_named.bin "${TINY[@]}" --out out_train_text_bin
bad train_text_shards "shards_text/train_000000.bin.*printable UTF-8 text" train shards_text "${TINY[@]}" --out out_train_text_shards
bad train_bad_npy "bad_magic.npy.*npy" train bad_magic.npy "${TINY[@]}" --vocab-size 64 --out out_train_bad_npy
bad train_float_npy "float.npy" train float.npy "${TINY[@]}" --vocab-size 64 --out out_train_float_npy
bad train_val_only "shards_val_only.*no \*train\* files" train shards_val_only "${TINY[@]}" --vocab-size 64 --out out_train_val_only
bad train_mixed_formats "mixes formats: 'mixed/a.bin' is llm.c" train mixed "${TINY[@]}" --vocab-size 64 --out out_train_mixed_formats
bad train_glob_nothing "nothing_\*.bin.*no glob match" train 'nothing_*.bin' "${TINY[@]}" --vocab-size 64 --out out_train_glob_nothing
bad train_val_data_with_text "--val-data" train text.txt --val-data good.bin "${TINY[@]}" --out out_train_val_data_with_text
bad train_vocab_size_text "--vocab-size" train text.txt --vocab-size 99 "${TINY[@]}" --out out_train_vocab_size_text
bad train_tokenizer_tokens "--tokenizer" train good.bin --tokenizer char "${TINY[@]}" --vocab-size 64 --out out_train_tokenizer_tokens
bad train_vocab_missing "vocab_missing.*encoder.json|encoder.json.*does not exist" train text.txt --vocab vocab_missing "${TINY[@]}" --out out_train_vocab_missing
bad train_vocab_bad "vocab_bad.*encoder.json|encoder.json" train text.txt --vocab vocab_bad "${TINY[@]}" --out out_train_vocab_bad
bad train_hellaswag_char "--hellaswag" train text.txt --hellaswag hs_bad.jsonl "${TINY[@]}" --out out_train_hellaswag_char
bad train_builtin_unknown "builtin:nope" train builtin:nope "${TINY[@]}" --out out_train_builtin_unknown

# --- train: options -------------------------------------------------------------------------------
bad opt_steps_zero "--steps must be positive" train text.txt --preset tiny --steps 0 "${CPU[@]}" --out out_opt_steps_zero
bad opt_steps_text "--steps" train text.txt "${TINY[@]}" --steps ten --out out_opt_steps_text
bad opt_batch_negative "--batch-size" train text.txt "${TINY[@]}" --batch-size -3 --out out_opt_batch_negative
bad opt_lr_inf "--lr" train text.txt "${TINY[@]}" --lr inf --out out_opt_lr_inf
bad opt_lr_negative "--lr" train text.txt "${TINY[@]}" --lr -0.1 --out out_opt_lr_negative
bad opt_min_lr_nan "--min-lr" train text.txt "${TINY[@]}" --min-lr nan --out out_opt_min_lr_nan
bad opt_grad_clip_nan "--grad-clip" train text.txt "${TINY[@]}" --grad-clip nan --out out_opt_grad_clip_nan
bad opt_beta2_one "--beta2" train text.txt "${TINY[@]}" --beta2 1 --out out_opt_beta2_one
bad opt_eps_zero "--eps" train text.txt "${TINY[@]}" --eps 0 --out out_opt_eps_zero
bad opt_zero_four "--zero must be 0, 1, 2 or 3, got 4" train text.txt "${TINY[@]}" --zero 4 --out out_opt_zero_four
bad opt_attention "--attention must be auto, flash, efficient, cudnn or math" train text.txt "${TINY[@]}" --attention fast --out out_opt_attention
bad opt_loss_chunk_rows "--loss-chunk-rows" train text.txt "${TINY[@]}" --loss-chunk-rows -1 --out out_opt_loss_chunk_rows
bad opt_dropout_one "--dropout" train text.txt "${TINY[@]}" --dropout 1 --out out_opt_dropout_one
bad opt_comm_timeout "--comm-timeout" train text.txt "${TINY[@]}" --comm-timeout -1 --out out_opt_comm_timeout
# Seconds past 64-bit nanoseconds: a 2-rank job failed at once ("did not finish within 1e+10 s").
bad opt_comm_timeout_huge "--comm-timeout must be 0 \(no limit\) or a number of seconds up to 1e9, got 1e\+10" \
  train text.txt "${TINY[@]}" --comm-timeout 1e10 --out out_opt_comm_timeout_huge
# Tokens per step that overflow int64 printed "= -128 tokens per step" and trained.
bad opt_grad_accum_overflow "--grad-accum 9223372036854775807 x 1 rank\(s\) is too large" \
  train text.txt "${TINY[@]}" --grad-accum 9223372036854775807 --out out_opt_grad_accum_overflow
bad plan_batch_overflow "--batch-size 9223372036854775807 x --seq-len 1024 .* is too large" \
  plan --preset gpt2 --batch-size 9223372036854775807
# Open MPI's variables set by hand, without mpirun: the process trained as a world of one.
OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 \
  bad opt_ompi_by_hand "OMPI_COMM_WORLD_SIZE is '2' but MPI started this process as rank 0 of 1" \
  train text.txt "${TINY[@]}" --out out_opt_ompi_by_hand
bad opt_heads "n_head \(3\) does not divide n_embd \(32\)" train text.txt "${TINY[@]}" --n-head 3 --out out_opt_heads
bad opt_seq_len "--seq-len 64 exceeds the model's block size 32" train text.txt --preset tiny --seq-len 64 "${CPU[@]}" --out out_opt_seq_len
bad opt_huge_model "beyond the 2\^40" train text.txt "${TINY[@]}" --n-embd 4000000000000 --n-head 1 --out out_opt_huge_model
bad opt_preset "unknown preset 'nope'" train text.txt --preset nope "${CPU[@]}" --out out_opt_preset
bad opt_device "unknown device 'tpu'" train text.txt --preset tiny --device tpu --out out_opt_device
bad opt_precision "--precision" train text.txt "${TINY[@]}" --precision fp8 --out out_opt_precision
bad opt_unknown "unrecognised option '--no-such-flag'" train text.txt "${TINY[@]}" --no-such-flag --out out_opt_unknown
bad opt_bias_word "--bias" train text.txt "${TINY[@]}" --bias maybe --out out_opt_bias_word
bad opt_total_batch "--total-batch-tokens" train text.txt "${TINY[@]}" --total-batch-tokens 33 --out out_opt_total_batch
bad opt_eval_steps_alone "--eval-steps has no effect" train text.txt "${TINY[@]}" --eval-steps 4 --out out_opt_eval_steps_alone
bad opt_sample_prompt_alone "--sample-prompt has no effect" train text.txt "${TINY[@]}" --sample-prompt hi --out out_opt_sample_prompt_alone
bad opt_out_file "--out 'a_file'" train text.txt "${TINY[@]}" --out a_file
bad opt_out_uncreatable "--out '/proc/nope/x'" train text.txt "${TINY[@]}" --out /proc/nope/x
bad opt_resume_missing "checkpoint 'absent.safetensors' does not exist" train text.txt "${TINY[@]}" --resume absent.safetensors --out out_opt_resume_missing
bad opt_resume_beyond "--steps 1.*step 2|step 2.*--steps 1" train text.txt --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 "${CPU[@]}" --steps 1 --resume "$CKPT" --out out_opt_resume_beyond
bad opt_init_and_resume "--init-from.*--resume PATH" train text.txt "${TINY[@]}" --init-from "$CKPT" --resume "$CKPT" --out out_opt_init_and_resume
bad opt_resume_damaged "optimizer_flipped.safetensors.*'optimizer.exp_avg.0.0' fails its checksum" train text.txt "${TINY[@]}" --resume optimizer_flipped.safetensors --out out_opt_resume_damaged
bad opt_init_shape "--n-layer 3 differs" train text.txt "${TINY[@]}" --init-from "$CKPT" --n-layer 3 --out out_opt_init_shape
bad opt_fresh_into_run "--out 'ckpt' holds an earlier run" train text.txt "${TINY[@]}" --out ckpt
bad opt_missing_value "--lr" train text.txt "${TINY[@]}" --out out_opt_missing_value --lr
# Thread counts far above the cores (any machine: both are above the absolute bound of 1024): 1000
# threads died in libgomp, 100000 hung while being created.
bad opt_threads_many "--threads 5000 is far more than this machine's [0-9]+ cores \(at most [0-9]+" train text.txt "${TINY[@]}" --threads 5000 --out out_opt_threads_many
bad opt_threads_huge "--threads 100000 is far more than" train text.txt "${TINY[@]}" --threads 100000 --out out_opt_threads_huge
bad plan_threads_huge "--threads 100000 is far more than" plan --threads 100000

# --- --config -------------------------------------------------------------------------------------
bad cfg_missing "config file 'no.cfg' does not exist" train text.txt "${TINY[@]}" --config no.cfg --out out_cfg_missing
bad cfg_dir "config file 'empty_dir' is a directory" train text.txt "${TINY[@]}" --config empty_dir --out out_cfg_dir
bad cfg_fifo "config file 'fifo' is not a regular file" train text.txt "${TINY[@]}" --config fifo --out out_cfg_fifo
bad cfg_unknown "unrecognised option 'bogus-option'" train text.txt "${TINY[@]}" --config cfg_unknown.cfg --out out_cfg_unknown
bad cfg_bad_value "config file 'cfg_badvalue.cfg'.*steps" train text.txt "${TINY[@]}" --config cfg_badvalue.cfg --out out_cfg_bad_value
bad cfg_negative "--lr" train text.txt "${TINY[@]}" --config cfg_negative.cfg --out out_cfg_negative
# Boost formats its messages by replacing %name% tokens and never ends on a value that holds one.
printf 'steps = 2%%canonical_option%%\n' >cfg_placeholder.cfg
bad cfg_placeholder "config file 'cfg_placeholder.cfg' holds '%canonical_option%'" train text.txt "${TINY[@]}" --config cfg_placeholder.cfg --out out_cfg_placeholder
printf 'st%%canonical_option%%s = 2\n' >cfg_placeholder_name.cfg
bad cfg_placeholder_name "config file 'cfg_placeholder_name.cfg' line 1 is not a .name = value. line" train text.txt "${TINY[@]}" --config cfg_placeholder_name.cfg --out out_cfg_placeholder_name
bad arg_placeholder "argument holds '%canonical_option%'" train text.txt "${TINY[@]}" --x%canonical_option%y --out out_arg_placeholder
# Every unknown name of a nanoGPT config in one line, each with its hint.
bad cfg_nanogpt "unrecognised options 'out_dir' \(nanoGPT's out_dir is out here\), 'eval_interval' .*, 'always_save_checkpoint' \(nanoGPT's always_save_checkpoint: .*\), 'wandb_log' \(.*\), 'n_layer' \(names use dashes: n-layer\)" train text.txt "${TINY[@]}" --config cfg_nanogpt.py --out out_cfg_nanogpt
bad cfg_garbage "cfg_garbage.cfg|option|syntax" train text.txt "${TINY[@]}" --config cfg_garbage.cfg --out out_cfg_garbage

# --- generate -------------------------------------------------------------------------------------
# Damage in the optimizer's state alone: generate, eval and export read the weights only, and do.
expect_ok gen_optimizer_flipped generate --checkpoint optimizer_flipped.safetensors --max-new-tokens 4 "${CPU[@]}" &&
  pass "generate reads the weights of a checkpoint whose optimizer state is damaged"
expect_ok eval_optimizer_flipped eval --checkpoint optimizer_flipped.safetensors --val text.txt --eval-steps 1 "${CPU[@]}" &&
  pass "eval reads the weights of a checkpoint whose optimizer state is damaged"
expect_ok export_optimizer_flipped export --checkpoint optimizer_flipped.safetensors --out out_export_optimizer_flipped &&
  pass "export reads the weights of a checkpoint whose optimizer state is damaged"
# --resume auto passes over a damaged newest checkpoint to the older intact one, with a note naming it;
# the recipe's options (text.txt, the tiny model, --steps 2) come from that checkpoint.
mkdir -p fallback && cp "$CKPT" fallback/ckpt_00000002.safetensors && cp optimizer_flipped.safetensors fallback/ckpt_00000003.safetensors
if expect_ok resume_fallback train --resume auto --steps 3 --out fallback "${CPU[@]}"; then
  check "the note names the damaged checkpoint and why" \
    grep -qE "passed over a damaged checkpoint: checkpoint 'fallback/ckpt_00000003.safetensors' is damaged: tensor 'optimizer.exp_avg.0.0' fails its checksum" resume_fallback.out
  check "resumed from the intact one" grep -q "resumed from fallback/ckpt_00000002.safetensors at step 2" resume_fallback.out
  check "the resumed run's data is its checkpoint's" grep -q "^data: .*text.txt" resume_fallback.out
fi
# Diverged weights: an update to 1e30 (finite) whose loss is not. The run stops without calling them
# good (exit 1); the periodic checkpoint holding them makes generate say so in one line (exit 2).
run diverge train text.txt --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 "${CPU[@]}" --steps 6 --lr 1e30 --max-bad-steps 2 --checkpoint-every 1 --out diverged
if [[ $RC -eq 1 ]] && grep -q "not saved (the newest checkpoint is diverged/ckpt_00000001.safetensors)" diverge.err; then
  pass "a diverged run stops without saving its weights as good: $(tail -n 1 diverge.err)"
else
  fail "a diverged run stops without saving its weights as good" "exit $RC: $(tail -c 300 diverge.err)"
fi
bad gen_diverged "ckpt_00000001.safetensors.*non-finite logits" generate --checkpoint diverged "${CPU[@]}"
bad gen_missing "checkpoint 'absent.safetensors' does not exist" generate --checkpoint absent.safetensors "${CPU[@]}"
# The checkpoint is also the one positional argument; a second one is named in the refusal.
bad gen_missing_positional "checkpoint 'absent.safetensors' does not exist" generate absent.safetensors "${CPU[@]}"
bad gen_extra_positional "unexpected argument 'extra': this command takes 1 positional argument\(s\) \(--checkpoint\)" generate absent.safetensors extra "${CPU[@]}"
bad train_extra_positional "unexpected argument 'more\.txt'" train text.txt more.txt "${TINY[@]}" --out out_train_extra_positional
bad gen_empty "empty.safetensors" generate --checkpoint empty.safetensors "${CPU[@]}"
bad gen_truncated "truncated.safetensors.*(truncated|damaged)" generate --checkpoint truncated.safetensors "${CPU[@]}"
bad gen_random "random.safetensors.*(truncated|damaged|not a checkpoint)" generate --checkpoint random.safetensors "${CPU[@]}"
bad gen_flipped "flipped.safetensors.*checksum|flipped.safetensors.*damaged" generate --checkpoint flipped.safetensors "${CPU[@]}"
bad gen_fifo "'fifo' is not a regular file|fifo" generate --checkpoint fifo "${CPU[@]}"
bad gen_empty_dir "empty_dir' holds no checkpoint" generate --checkpoint empty_dir "${CPU[@]}"
bad gen_temperature_nan "--temperature" generate --checkpoint ckpt "${CPU[@]}" --temperature nan
bad gen_temperature_negative "--temperature" generate --checkpoint ckpt "${CPU[@]}" --temperature -1
bad gen_top_k_negative "--top-k" generate --checkpoint ckpt "${CPU[@]}" --top-k -2
bad gen_tokens_negative "--max-new-tokens" generate --checkpoint ckpt "${CPU[@]}" --max-new-tokens -5
bad gen_prompt_outside "^mygpt-ddp: error: --prompt: character 'Z' is not in the vocabulary of this character-level model, which knows [0-9]+ characters: .*a-z" \
  generate --checkpoint ckpt "${CPU[@]}" --prompt "Z"
bad gen_prompt_euro "--prompt: character '€' is not in the vocabulary of this character-level model" generate --checkpoint ckpt \
  "${CPU[@]}" --prompt "a€"
bad train_sample_prompt_outside "--sample-prompt: character '€' is not in the vocabulary of this character-level model" \
  train text.txt "${TINY[@]}" --sample-every 1 --sample-prompt "€" --out out_sample_prompt
# --top-k 0 is its default (keep all): greedy decoding contradicts only a real cut.
expect_ok gen_greedy_top_k0 generate --checkpoint ckpt "${CPU[@]}" --temperature 0 --top-k 0 --max-new-tokens 4 &&
  pass "generate --temperature 0 --top-k 0 is accepted"
bad gen_greedy_top_k5 "--top-k has no effect with --temperature 0" generate --checkpoint ckpt "${CPU[@]}" --temperature 0 --top-k 5
bad gen_vocab_on_char "--vocab does not apply" generate --checkpoint ckpt "${CPU[@]}" --vocab vocab_bad
bad gen_hf_relu "activation_function" generate --checkpoint hf_relu "${CPU[@]}"
bad gen_threads_negative "--threads" generate --checkpoint ckpt "${CPU[@]}" --threads -1
bad gen_kv_cache_word "--kv-cache" generate --checkpoint ckpt "${CPU[@]}" --kv-cache maybe
bad eval_hf_noweights "hf_noweights.*model.safetensors" eval --checkpoint hf_noweights --val good.bin "${CPU[@]}"
bad eval_hf_badweights "hf_badweights/model.safetensors" eval --checkpoint hf_badweights --val good.bin "${CPU[@]}"
bad gen_no_checkpoint "--checkpoint" generate "${CPU[@]}"

# --- eval -----------------------------------------------------------------------------------------
bad eval_no_mode "exactly one of --val, --hellaswag, --core or --task" eval --checkpoint ckpt "${CPU[@]}"
bad eval_two_modes "exactly one of --val, --hellaswag, --core or --task" eval --checkpoint ckpt --val text.txt --task builtin:sort "${CPU[@]}"
bad eval_val_missing "nope.bin" eval --checkpoint ckpt --val nope.bin "${CPU[@]}"
bad eval_val_fifo "fifo" eval --checkpoint ckpt --val fifo "${CPU[@]}"
bad eval_val_binary_text "binary.txt" eval --checkpoint ckpt --val binary.txt "${CPU[@]}"
bad eval_hellaswag_char "--hellaswag needs a model with a BPE tokenizer" eval --checkpoint ckpt --hellaswag hs_bad.jsonl "${CPU[@]}"
bad eval_task_unknown "builtin:nope" eval --checkpoint ckpt --task builtin:nope "${CPU[@]}"
bad eval_threads_word "--threads" eval --checkpoint ckpt --task builtin:sort --threads many "${CPU[@]}"
bad eval_batch_zero "--batch-size" eval --checkpoint ckpt --val text.txt --batch-size 0 "${CPU[@]}"
bad eval_seq_len_long "--seq-len" eval --checkpoint ckpt --val text.txt --seq-len 4096 "${CPU[@]}"
bad eval_flipped "flipped.safetensors" eval --checkpoint flipped.safetensors --val text.txt "${CPU[@]}"

# --- prepare --------------------------------------------------------------------------------------
bad prep_missing "input file 'nope.txt' does not exist" prepare --input nope.txt --out out_prep_missing --tokenizer char
bad prep_dir "--input folder 'empty_dir' holds no .parquet files" prepare --input empty_dir --out out_prep_dir --tokenizer char
bad prep_fifo "input file 'fifo' is not a regular file" prepare --input fifo --out out_prep_fifo --tokenizer char
bad prep_notext "docs_notext.jsonl' line 2 has no \"text\" string" prepare --input docs_notext.jsonl --out out_prep_notext --tokenizer char
bad prep_badjson "docs_badjson.jsonl' line 2" prepare --input docs_badjson.jsonl --out out_prep_badjson --tokenizer char
bad prep_gpt2_no_vocab "--tokenizer gpt2 needs --vocab" prepare --input text.txt --out out_prep_gpt2_no_vocab
bad prep_hf_no_vocab "--tokenizer hf needs --vocab" prepare --input text.txt --out out_prep_hf_no_vocab --tokenizer hf
# It failed as "all 0 tokens went to validation: lower --val-tokens" (train: "the training split is empty").
bad prep_hf_empty_vocab "tok_empty_vocab/tokenizer.json: the BPE model's vocab is empty" prepare --input text.txt \
  --out out_prep_hf_empty_vocab --vocab tok_empty_vocab
bad train_hf_empty_vocab "tok_empty_vocab/tokenizer.json: the BPE model's vocab is empty" train text.txt \
  --vocab tok_empty_vocab "${TINY[@]}" --out out_train_hf_empty_vocab
bad prep_out_file "--out 'a_file'" prepare --input text.txt --out a_file --tokenizer char
bad prep_shard_zero "--shard-tokens" prepare --input text.txt --out out_prep_shard_zero --tokenizer char --shard-tokens 0
bad prep_no_input "--input" prepare --out out_prep_no_input --tokenizer char

# --- plan and export ------------------------------------------------------------------------------
bad plan_huge "beyond the 2\^40" plan --n-embd 4000000000000 --n-head 1
bad plan_heads "n_head \(5\) does not divide" plan --n-head 5
# The model family's bad configs (model/gpt_config.h).
bad plan_kv_heads "n_kv_head \(3\) does not divide n_head \(4\)" plan --preset llama-small --n-kv-head 3
bad plan_rotary_odd "rotary positions need an even head size, got 15" plan --preset llama-small --n-embd 60
bad plan_softcap_zero "--logit-softcap: logit soft-cap must be a positive number or none" plan --logit-softcap 0
bad plan_softcap_negative "--logit-softcap: logit soft-cap must be a positive number or none" plan --logit-softcap=-3
# Finite as a double, inf as the fp32 logits' float: every loss was NaN and every step skipped.
bad plan_softcap_beyond_float "--logit-softcap: logit soft-cap must be at most 3.4e38 \(float32's largest number\), got '1e40'" \
  plan --logit-softcap 1e40
bad train_softcap_beyond_float "--logit-softcap: logit soft-cap must be at most 3.4e38" train text.txt "${TINY[@]}" \
  --logit-softcap 1e40 --out out_train_softcap_beyond_float
# 0 as the fp32 logits' float: the run trained with no cap at all (1e-39, subnormal: a dead run).
bad train_softcap_below_float "--logit-softcap: logit soft-cap must be at least 1.2e-38" train text.txt "${TINY[@]}" \
  --logit-softcap 1e-50 --out out_train_softcap_below_float
# Named by the flag, not by the config field it sets.
bad plan_rope_theta_zero "--rope-theta must be above 1, got 0" plan --preset llama-small --rope-theta 0
bad plan_norm_eps_zero "--norm-eps must be above 0 and below 1, got 0" plan --norm-eps 0
bad plan_mlp_unknown "--mlp: unknown mlp .geglu." plan --mlp geglu
bad plan_nanochat_depth "unknown preset 'nanochat-d0'" plan --preset nanochat-d0
bad plan_init_missing "checkpoint 'absent.safetensors' does not exist" plan --init-from absent.safetensors
bad export_missing "checkpoint 'absent.safetensors' does not exist" export --checkpoint absent.safetensors --out out_export_missing
bad export_to_file "--out 'a_file' is a file" export --checkpoint ckpt --out a_file
bad export_flipped "flipped.safetensors" export --checkpoint flipped.safetensors --out out_export_flipped
bad export_no_out "--out" export --checkpoint ckpt
bad export_out_empty "^mygpt-ddp: error: --out is empty" export --checkpoint ckpt --out ""
bad export_out_proc "^mygpt-ddp: error: --out '/proc/x': cannot create a folder in /proc" export --checkpoint ckpt --out /proc/x
check "export of a damaged checkpoint leaves no folder" test ! -e out_export_flipped

# --- a full disk ----------------------------------------------------------------------------------
# A tmpfs smaller than one checkpoint (~400 KB here): the save fails with one line, exit 2, and leaves
# no file under a checkpoint's name. Needs root and a kernel that lets us mount; skipped otherwise.
mkdir -p full
if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=200k tmpfs full 2>/dev/null; then
  trap 'umount "$WORK/full" 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT
  # Checked before the first step (issue 40: 30 steps trained, then the first save failed): one line naming
  # --out, what the checkpoints need and what is free; nothing trained, nothing left.
  bad full_disk_checkpoint "^mygpt-ddp: error: --out 'full/run': this run's checkpoints need about [0-9.]+ MiB \(2 more checkpoint\(s\): --keep-checkpoints 2 and the one being written, 0 already in --out, [0-9.]+ MiB each\) and its file system has 0\.[0-9] MiB free" \
    train text.txt "${TINY[@]}" --checkpoint-every 1 --keep-checkpoints 2 --out full/run
  check "... before any step" bash -c "! grep -q '^step' '$WORK/full_disk_checkpoint.out'"
  check "a full disk leaves no checkpoint or temporary" test -z "$(find full -name 'ckpt_*')"
  # The space a run without checkpoints needs is none: its files fail one by one below.
  # Every other file a run writes, on a disk with room for PAGES more 4 KiB pages (issue 19): one line,
  # exit 2, and nothing half-written under the file's name.
  fill_leaving() {
    rm -rf full/*
    dd if=/dev/zero of=full/filler bs=4096 2>/dev/null
    [[ $1 -eq 0 ]] || truncate -s -$(($1 * 4096)) full/filler
  }
  fill_leaving 0
  bad full_disk_claim "--out 'full/run': cannot write a file in it: No space left" train text.txt "${TINY[@]}" --out full/run
  check "a claim that could not be written leaves nothing" test -z "$(find full/run -name '*lock*')"
  fill_leaving 1  # the claim fits, run.json does not
  bad full_disk_run_record "cannot write full/run/run.json.*No space left" train text.txt "${TINY[@]}" --final-checkpoint false \
    --out full/run
  check "no run.json nor temporary, claim released" test -z "$(find full/run -name '*run.json*' -o -name 'run.lock')"
  fill_leaving 1
  bad full_disk_shards "cannot write full/shards/.*No space left" prepare --input text.txt --tokenizer char --val-tokens 0 \
    --shard-tokens 100000 --out full/shards --quiet
  check "a full disk leaves no shard" test -z "$(find full/shards -name '*.bin*')"
  fill_leaving 2
  bad full_disk_export "cannot write .*full/.*export.*No space left" export --checkpoint ckpt --out full/export
  check "a full disk leaves no exported model" test -z "$(find full/export -name 'model.safetensors' -o -name 'config.json')"
  umount full
else
  skip "full disk (needs root and mount -t tmpfs)"
fi

# --- a file prepare writes that cannot be published (a folder in its place): one line, exit 2 ---------
mkdir -p out_prep_vocab_blocked/char_vocab.txt/inside
bad prep_vocab_blocked "cannot write out_prep_vocab_blocked/char_vocab.txt" prepare --input text.txt --tokenizer char \
  --out out_prep_vocab_blocked --quiet

# --- launchers' variables, half given (tests/launch/launch_test.sh has the rest) -----------------------
export SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4
bad srun_half_variables "SLURM_LOCALID" train text.txt "${TINY[@]}" --out out_srun_half
unset SLURM_PROCID SLURM_STEP_NUM_TASKS
export WORLD_SIZE=2 RANK=0 LOCAL_RANK=0
bad torchrun_half_variables "LOCAL_RANK is set but LOCAL_WORLD_SIZE is not" train text.txt "${TINY[@]}" \
  --out out_torchrun_half
unset WORLD_SIZE RANK LOCAL_RANK
export WORLD_SIZE=abc RANK=0
bad world_size_not_a_number "WORLD_SIZE='abc' is not a whole number" train text.txt "${TINY[@]}" --out out_world_nan
unset WORLD_SIZE RANK

# A resumed run keeps its data order: another is refused in words, not "data loader state is not a
# generator state" (ckpt trained with the default order, sequential for so short a run).
cp -r ckpt ckpt_order
RESUME=(--preset tiny --batch-size 2 --seq-len 16 --eval-every 0 "${CPU[@]}" --resume auto --out ckpt_order)
bad resume_other_order "--data-order random: a resumed run keeps its data order \(this one reads its data sequential\); .*start a new run" \
  train text.txt "${RESUME[@]}" --steps 4 --data-order random
expect_ok resume_same_order train text.txt "${RESUME[@]}" --steps 3 &&
  check "a resumed run prints its data order line" grep -q "^data order: sequential (the resumed run's)" "$WORK/resume_same_order.out"
export RANK=0 WORLD_SIZE=2
bad rendezvous_missing_dir "--rendezvous file:$WORK/no/such/dir: no such directory" train text.txt "${TINY[@]}" \
  --rendezvous "file:$WORK/no/such/dir" --comm-timeout 5 --out out_rendezvous_missing
check "--rendezvous file: of a missing folder creates none of its path" test ! -e "$WORK/no"
unset RANK WORLD_SIZE

# --- issue 64: documents are not a text to train on, a folder mixes no kinds, the advice is a road ------
python3 - <<'PY'
import os, random
os.makedirs("mixed_docs", exist_ok=True)
os.makedirs("jsonl_docs", exist_ok=True)
open("fake.parquet", "wb").write(b"PAR1" + bytes(range(200)) + b"PAR1")
open("mixed_docs/x.parquet", "wb").write(b"PAR1" + bytes(range(200)) + b"PAR1")
open("mixed_docs/a.jsonl", "w").write('{"text": "one"}\n')
open("mixed_docs/b.txt", "w").write("two\n")
open("jsonl_docs/a.jsonl", "w").write('{"text": "one"}\n')
random.seed(3)
words = "the quick brown fox jumps over the lazy dog".split()
with open("docs_lines.jsonl", "w") as f:
    for i in range(300):
        f.write('{"text": "%s."}\n' % " ".join(random.choice(words) for _ in range(random.randint(2, 6))))
PY
bad train_parquet "data file 'fake.parquet' is Parquet, which train does not read: prepare it first" \
  train fake.parquet "${TINY[@]}" --out out_train_parquet
bad train_jsonl "data file 'docs_lines.jsonl' is JSON lines, .*prepare it .* or give --sft for conversations" \
  train docs_lines.jsonl "${TINY[@]}" --out out_train_jsonl
bad prep_mixed_folder "--input folder 'mixed_docs' holds 1 .parquet file\(s\) and other documents \(a.jsonl, b.txt\)" \
  prepare --input mixed_docs --out out_prep_mixed_folder --tokenizer char
bad prep_folder_jsonl "--input folder 'jsonl_docs' holds no .parquet files \(a folder gives its .parquet files; it holds a.jsonl" \
  prepare --input jsonl_docs --out out_prep_folder_jsonl --tokenizer char
bad tok_special_plain "--special 'the': a special token is matched wherever its text appears" \
  tokenizer train text.txt --vocab-size 300 --special the --out out_tok_special_plain
# Best-fit's advice is a road that runs: a tokenizer without a delimiter points to prepare with a BPE
# tokenizer; one text prepared whole is one document far longer than a row, refused in words that name
# --packing rows (it trained on one crop over and over); a JSON-lines file's documents train, the cropped
# share in the step lines.
bad train_bestfit_char "--packing best-fit needs documents delimited .*mygpt-ddp prepare --input FILE --vocab DIR --out SHARDS" \
  train text.txt "${TINY[@]}" --packing best-fit --out out_train_bestfit_char
if expect_ok bf_tok tokenizer train text.txt docs_lines.jsonl --vocab-size 300 --out bf_tok --quiet &&
  expect_ok bf_prep_text prepare --input text.txt --vocab bf_tok --out bf_text --quiet &&
  expect_ok bf_prep_docs prepare --input docs_lines.jsonl --vocab bf_tok --out bf_docs --quiet; then
  bad train_bestfit_one_document "--packing best-fit: the documents are far longer than a row: .* --packing rows \(the default\)" \
    train bf_text "${TINY[@]}" --packing best-fit --out out_bf_one_document
  if expect_ok bf_train_docs train bf_docs "${TINY[@]}" --packing best-fit --log-every 1 --out bf_run; then
    check "best-fit on documents trains, its step lines carry the cropped share" \
      grep -qE "^step +1 \|.* \| cropped: [0-9.]+%$" "$WORK/bf_train_docs.out"
    check "and metrics.jsonl records it" grep -q '"cropped_share":' bf_run/metrics.jsonl
  fi
fi

# --- commands -------------------------------------------------------------------------------------
bad no_command "missing command"
bad unknown_command "unknown command 'frobnicate'" frobnicate
finish
